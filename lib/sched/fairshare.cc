#include "lib/sched/fairshare.h"

#include <algorithm>
#include <cmath>

namespace hpcq::sched {
namespace {

const std::string kRoot = "root";

}  // namespace

FairShareTree::FairShareTree() {
  FairShareNode root;
  root.account = kRoot;
  root.raw_shares = 1;
  root.norm_shares = 1;
  add_node(std::move(root));
}

int FairShareTree::add_node(FairShareNode node) {
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

int FairShareTree::add_user(std::uint32_t uid, const std::string& account, double shares,
                            bool implicit) {
  const auto [it, inserted] = users_.try_emplace(Key{uid, account}, -1);
  if (!inserted) return it->second;
  FairShareNode node;
  node.account = account;
  node.uid = uid;
  node.is_user = true;
  node.implicit = implicit;
  node.raw_shares = std::max(0.0, shares);
  node.parent = account == kRoot ? 0 : accounts_.at(account);
  it->second = add_node(std::move(node));
  return it->second;
}

const std::string& FairShareTree::charged_account(std::uint32_t uid,
                                                  const std::string& account) const {
  if (account == kRoot) return kRoot;
  if (!account.empty()) {
    const auto it = accounts_.find(account);
    if (it != accounts_.end()) return it->first;
  }
  const auto def = default_account_.find(uid);
  if (def != default_account_.end()) return def->second;
  return kRoot;
}

FairShareTree FairShareTree::compute(const Snapshot& snapshot) {
  std::vector<Key> seen;
  seen.reserve(snapshot.queue.size() + snapshot.running.size());
  for (const PendingJob& job : snapshot.queue) seen.emplace_back(job.uid, job.account);
  for (const RunningJob& job : snapshot.running) seen.emplace_back(job.uid, job.account);
  return compute(snapshot.site, snapshot.usage, snapshot.now, seen);
}

FairShareTree FairShareTree::compute(const SitePolicy* site, const UsageLedger* usage, TimeUs now,
                                     const std::vector<Key>& seen) {
  FairShareTree tree;
  std::vector<std::string> parents;  // by node index, accounts only
  parents.emplace_back();
  if (site != nullptr) {
    for (const AccountConfig& a : site->accounts) {
      if (a.name.empty() || a.name == kRoot || tree.accounts_.count(a.name) != 0) continue;
      FairShareNode node;
      node.account = a.name;
      node.raw_shares = std::max(0.0, a.shares);
      tree.accounts_.emplace(a.name, tree.add_node(std::move(node)));
      parents.push_back(a.parent);
    }
    const int accounts = static_cast<int>(tree.nodes_.size());
    for (int i = 1; i < accounts; ++i) {
      const auto it = tree.accounts_.find(parents[static_cast<std::size_t>(i)]);
      tree.nodes_[static_cast<std::size_t>(i)].parent = it == tree.accounts_.end() ? 0 : it->second;
    }
    // A parent cycle never reaches root: cut it there. Once one member of a
    // cycle hangs under root the others reach root through it.
    for (int i = 1; i < accounts; ++i) {
      int at = i;
      int steps = 0;
      while (at != 0 && steps <= accounts) {
        at = tree.nodes_[static_cast<std::size_t>(at)].parent;
        ++steps;
      }
      if (at != 0) tree.nodes_[static_cast<std::size_t>(i)].parent = 0;
    }
    for (const UserShare& u : site->users) {
      const std::string& account =
          u.account == kRoot || tree.accounts_.count(u.account) != 0 ? u.account : kRoot;
      if (tree.users_.count(Key{u.uid, account}) != 0) continue;
      tree.add_user(u.uid, account, u.shares, /*implicit=*/false);
      tree.default_account_.try_emplace(u.uid, account);
    }
  }
  for (const Key& key : seen) {
    tree.add_user(key.first, tree.charged_account(key.first, key.second), 1.0, /*implicit=*/true);
  }
  tree.finish(usage, now);
  return tree;
}

void FairShareTree::finish(const UsageLedger* usage, TimeUs now) {
  std::vector<UsageEntry> entries;
  if (usage != nullptr) entries = usage->entries();
  std::vector<int> charged;  // node of each entry
  charged.reserve(entries.size());
  for (const UsageEntry& e : entries) {
    charged.push_back(add_user(e.uid, charged_account(e.uid, e.account), 1.0, /*implicit=*/true));
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const double decayed = entries[i].core_seconds * usage->decay_factor(now - entries[i].as_of);
    nodes_[static_cast<std::size_t>(charged[i])].raw_usage += decayed;
  }

  // Breadth-first order from root: parents before children whatever the
  // configuration order was.
  std::vector<std::vector<int>> children(nodes_.size());
  for (std::size_t i = 1; i < nodes_.size(); ++i) {
    children[static_cast<std::size_t>(nodes_[i].parent)].push_back(static_cast<int>(i));
  }
  std::vector<int> order;
  order.reserve(nodes_.size());
  order.push_back(0);
  for (std::size_t k = 0; k < order.size(); ++k) {
    for (int child : children[static_cast<std::size_t>(order[k])]) order.push_back(child);
  }

  for (std::size_t k = order.size(); k-- > 1;) {
    const FairShareNode& n = nodes_[static_cast<std::size_t>(order[k])];
    nodes_[static_cast<std::size_t>(n.parent)].raw_usage += n.raw_usage;
  }
  const double total = nodes_[0].raw_usage;
  nodes_[0].norm_usage = total > 0 ? 1.0 : 0.0;
  nodes_[0].effective_usage = nodes_[0].norm_usage;

  for (int index : order) {
    const auto& kids = children[static_cast<std::size_t>(index)];
    double sibling_shares = 0;
    for (int child : kids) sibling_shares += nodes_[static_cast<std::size_t>(child)].raw_shares;
    const FairShareNode& parent = nodes_[static_cast<std::size_t>(index)];
    for (int child : kids) {
      FairShareNode& n = nodes_[static_cast<std::size_t>(child)];
      const double fraction = sibling_shares > 0 ? n.raw_shares / sibling_shares : 0.0;
      n.norm_shares = parent.norm_shares * fraction;
      n.norm_usage = total > 0 ? n.raw_usage / total : 0.0;
      n.effective_usage = index == 0
                              ? n.norm_usage
                              : n.norm_usage + (parent.effective_usage - n.norm_usage) * fraction;
      n.factor = n.norm_shares > 0 ? std::exp2(-n.effective_usage / n.norm_shares) : 0.0;
    }
  }
}

double FairShareTree::factor(std::uint32_t uid, const std::string& account) const {
  const std::string& charged = charged_account(uid, account);
  const auto it = users_.find(Key{uid, charged});
  if (it != users_.end()) return nodes_[static_cast<std::size_t>(it->second)].factor;
  // An unseen sibling with shares 1 and no usage: UE = UE_parent * f and
  // S = S_parent * f give F = 2^(-UE_parent / S_parent), the account's own
  // factor (under root, UE = U = 0: F = 1).
  if (charged == kRoot) return 1.0;
  return nodes_[static_cast<std::size_t>(accounts_.at(charged))].factor;
}

const FairShareNode* FairShareTree::find_user(std::uint32_t uid, const std::string& account) const {
  const auto it = users_.find(Key{uid, account});
  return it == users_.end() ? nullptr : &nodes_[static_cast<std::size_t>(it->second)];
}

const FairShareNode* FairShareTree::find_account(const std::string& name) const {
  if (name == kRoot) return &nodes_[0];
  const auto it = accounts_.find(name);
  return it == accounts_.end() ? nullptr : &nodes_[static_cast<std::size_t>(it->second)];
}

}  // namespace hpcq::sched
