#include "lib/overlay/tree.h"

namespace hpcq::overlay {

Rank parent_of(Rank rank, int fanout) {
  return rank == 0 ? 0 : (rank - 1) / static_cast<Rank>(fanout);
}

std::vector<Rank> children_of(Rank rank, int fanout, int size) {
  std::vector<Rank> children;
  for (int i = 1; i <= fanout; ++i) {
    Rank child = rank * static_cast<Rank>(fanout) + static_cast<Rank>(i);
    if (child >= static_cast<Rank>(size)) break;
    children.push_back(child);
  }
  return children;
}

std::optional<Rank> next_hop_down(Rank self, Rank target, int fanout) {
  while (target != 0) {
    Rank parent = parent_of(target, fanout);
    if (parent == self) return target;
    target = parent;
  }
  return std::nullopt;
}

std::vector<Rank> path_down(Rank self, Rank target, int fanout) {
  std::vector<Rank> up;  // target, its parent, ... up to self's child
  for (Rank r = target; r != 0 && r != self; r = parent_of(r, fanout)) {
    up.push_back(r);
    if (parent_of(r, fanout) == self) return {up.rbegin(), up.rend()};
  }
  return {};
}

}  // namespace hpcq::overlay
