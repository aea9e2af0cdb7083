// The fair-share tree: Slurm's classic fair-share factor for every user
// association, from the site's account tree (SitePolicy.accounts, .users) and
// the decayed usage in a UsageLedger.
//
// Formulas (Slurm, "Classic Fairshare Algorithm",
// https://slurm.schedmd.com/classic_fair_share.html, PriorityFlags=NO_FAIR_TREE):
//   normalised shares  S = (S_user / S_siblings) * (S_account / S_sibling-accounts) * ...
//                      down from root; users and sub-accounts of one account
//                      are siblings of each other, as in Slurm's association tree.
//   normalised usage   U = U_raw / U_total (U_total: all usage on the cluster;
//                      an account's U_raw is the sum over its users and
//                      sub-accounts; 0 when nobody used anything).
//   effective usage    UE = U_child + (UE_parent - U_child) * S_child / S_all_siblings
//                      where S_child and S_all_siblings are raw shares; for the
//                      children of root UE = U (root's "parent" usage is not
//                      defined; Slurm's _set_usage_efctv does the same, and the
//                      depth-oblivious page notes both formulas agree there).
//   fair-share factor  F = 2^(-UE / S), in (0, 1]; F = 0 when S = 0 (zero shares
//                      never earn priority, as in Slurm).
//
// Which association a job (uid, account) charges, in this order:
//   1. `account` when it names a configured account (or "root"): the user's
//      configured association there, else an implicit one with shares 1;
//   2. the user's first configured association (Slurm's default account);
//   3. an implicit association under "root" with shares 1.
// The same rule maps the ledger's (uid, account) keys, so usage lands where
// the job's factor is read. Implicit associations are siblings like any other
// (they take a share), so compute() must see them: it collects them from the
// snapshot's queue, running jobs and ledger. A lookup of an association that
// compute() did not see reads its account's factor (what a new, unused
// sibling with shares 1 would get is F_parent) or 1 directly under root.
// Config faults never fail: an account with an unknown parent, or in a
// parent cycle, hangs under root; a user association naming an unknown account
// is under root; repeated names keep the first.
//
// Cost: compute() is O((accounts + associations + ledger entries + jobs) *
// log) once per cycle; factor() is O(log associations). Immutable after
// compute(); safe to read from several threads, built on one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/site_policy.h"
#include "lib/sched/snapshot.h"
#include "lib/sched/usage.h"

namespace hpcq::sched {

// An account (is_user false) or a user association (is_user true), as sshare
// shows it.
struct FairShareNode {
  std::string account;  // the account, or for a user the account it charges
  std::uint32_t uid = 0;
  bool is_user = false;
  bool implicit = false;  // not in the site policy (shares 1)
  int parent = -1;        // index in nodes(); -1 for root
  double raw_shares = 0;
  double norm_shares = 0;
  double raw_usage = 0;  // decayed core-seconds
  double norm_usage = 0;
  double effective_usage = 0;
  double factor = 1;
};

class FairShareTree {
 public:
  // (uid, account) as charged or submitted.
  using Key = std::pair<std::uint32_t, std::string>;

  // Only root: every factor is 1.
  FairShareTree();

  // The tree for one cycle: snapshot.site, snapshot.usage at snapshot.now,
  // with implicit associations for the queue's and running jobs' users.
  static FairShareTree compute(const Snapshot& snapshot);
  // The same from parts; `seen` lists (uid, account) pairs that may need an
  // implicit association. `site` and `usage` may be null.
  static FairShareTree compute(const SitePolicy* site, const UsageLedger* usage, TimeUs now,
                               const std::vector<Key>& seen);

  // The fair-share factor of the association that (uid, account) charges.
  double factor(std::uint32_t uid, const std::string& account) const;
  double factor(const PendingJob& job) const { return factor(job.uid, job.account); }
  // The account that (uid, account) charges (rules above).
  const std::string& charged_account(std::uint32_t uid, const std::string& account) const;

  // nullptr when not in the tree.
  const FairShareNode* find_user(std::uint32_t uid, const std::string& account) const;
  const FairShareNode* find_account(const std::string& name) const;
  // Root first, then accounts in configuration order, then associations.
  const std::vector<FairShareNode>& nodes() const { return nodes_; }

 private:
  int add_node(FairShareNode node);
  int add_user(std::uint32_t uid, const std::string& account, double shares, bool implicit);
  void finish(const UsageLedger* usage, TimeUs now);

  std::vector<FairShareNode> nodes_;
  std::unordered_map<std::string, int> accounts_;
  std::map<Key, int> users_;
  // The first configured association's account of each user.
  std::unordered_map<std::uint32_t, std::string> default_account_;
};

}  // namespace hpcq::sched
