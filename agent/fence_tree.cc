#include "agent/fence_tree.h"

#include <algorithm>

#include "lib/overlay/tree.h"

namespace hpcq::agent {

bool FenceTree::below_or_self(Rank rank) const {
  return rank == self_ || overlay::next_hop_down(self_, rank, fanout_).has_value();
}

std::vector<overlay::PmiFence> FenceTree::up(overlay::PmiFence fence, TimeUs now) {
  const Key key{fence.job_id(), fence.attempt(), fence.step(), fence.seq()};
  const World world{fence.job_id(), fence.attempt(), fence.step()};
  auto sent = sent_.find(world);
  if (sent != sent_.end() && sent->second.seq >= fence.seq()) {  // a copy, or a latecomer
    sent->second.at = now;
    return {std::move(fence)};
  }
  auto held = held_.find(key);
  if (held == held_.end()) {
    std::set<Rank> expected;
    for (Rank r : fence.world()) {
      if (below_or_self(r)) expected.insert(r);
    }
    std::set<Rank> from;
    for (const overlay::PmiContribution& part : fence.parts()) from.insert(part.rank());
    // Nothing else to wait for here.
    if (std::includes(from.begin(), from.end(), expected.begin(), expected.end())) {
      return {std::move(fence)};
    }
    held = held_.emplace(key, Held{{}, {}, std::move(expected), now}).first;
    held->second.fence = fence;
    held->second.fence.clear_parts();
  }
  Held& h = held->second;
  bool copy = false;
  for (overlay::PmiContribution& part : *fence.mutable_parts()) {
    if (!h.from.insert(part.rank()).second) {
      copy = true;  // its sender has waited two heartbeats: send on what is here
      continue;
    }
    h.bytes += part.kvs().size();
    *h.fence.add_parts() = std::move(part);
  }
  if (!copy && h.bytes <= max_bytes_ &&
      !std::includes(h.from.begin(), h.from.end(), h.expected.begin(), h.expected.end())) {
    return {};
  }
  std::vector<overlay::PmiFence> out{std::move(h.fence)};
  held_.erase(held);
  sent_[world] = {fence.seq(), now};
  return out;
}

std::vector<overlay::PmiFence> FenceTree::expire(TimeUs now, TimeUs hold) {
  std::erase_if(sent_, [&](const auto& s) { return s.second.at < now - kForgetAfter; });
  std::vector<overlay::PmiFence> out;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.since >= now - hold) {
      ++it;
      continue;
    }
    const auto& [id, attempt, step, seq] = it->first;
    Sent& sent = sent_[{id, attempt, step}];
    sent.seq = std::max(sent.seq, seq);
    sent.at = now;
    out.push_back(std::move(it->second.fence));
    it = held_.erase(it);
  }
  return out;
}

FenceTree::Down FenceTree::down(Rank dst, const overlay::PmiFenceDone& done) const {
  Down d;
  std::vector<Rank> to;
  for (Rank r : done.to()) to.push_back(r);
  if (to.empty()) to.push_back(dst);
  std::map<Rank, std::vector<Rank>> by_child;  // the child towards them -> ranks
  for (Rank r : to) {
    if (r == self_) {
      d.here = true;
      continue;
    }
    // One that is not below (the tree healed around it): on its own, up.
    by_child[overlay::next_hop_down(self_, r, fanout_).value_or(r)].push_back(r);
  }
  for (auto& [child, ranks] : by_child) {
    overlay::PmiFenceDone copy = done;
    copy.clear_to();
    for (Rank r : ranks) copy.add_to(r);
    // The shallowest: ranks number the k-ary tree level by level.
    d.onward.emplace_back(*std::min_element(ranks.begin(), ranks.end()), std::move(copy));
  }
  return d;
}

}  // namespace hpcq::agent
