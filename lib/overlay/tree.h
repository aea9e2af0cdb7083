// The shape of the tree overlay network: a k-ary tree over ranks 0..size-1
// with the leader at rank 0 (as Flux's TBON). Pure functions.
#pragma once

#include <optional>
#include <vector>

#include "lib/core/ids.h"

namespace hpcq::overlay {

// Parent of rank r >= 1 in a tree of fan-out k: (r - 1) / k.
Rank parent_of(Rank rank, int fanout);
std::vector<Rank> children_of(Rank rank, int fanout, int size);
// The child of `self` whose subtree contains `target`, or nullopt when target
// is not below self.
std::optional<Rank> next_hop_down(Rank self, Rank target, int fanout);
// The ranks from self's child towards `target` down to target itself
// ([child, grandchild, ..., target]); empty when target is not below self.
// Where the child is gone, a deeper one may have attached to self directly.
std::vector<Rank> path_down(Rank self, Rank target, int fanout);

}  // namespace hpcq::overlay
