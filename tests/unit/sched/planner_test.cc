#include "lib/sched/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "lib/resource/hwloc_import.h"

namespace hpcq::sched {
namespace {

constexpr TimeUs kNow = 1000 * kUsPerSecond;
constexpr TimeUs at(std::int64_t s) { return kNow + s * kUsPerSecond; }
constexpr TimeUs secs(std::int64_t s) { return s * kUsPerSecond; }

resource::NodePool cluster(int nodes, const std::string& spec) {
  resource::NodePool pool;
  auto t = resource::discover_topology(spec);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  for (int i = 1; i <= nodes; ++i) {
    std::string name = "n";  // not "n" + ...: a false -Wrestrict from GCC 12 at -O3
    name += std::to_string(i);
    EXPECT_TRUE(pool.add_node(static_cast<Rank>(i), name, *t).is_ok());
  }
  return pool;
}

// Takes `cores` cores (and memory) on `rank` in the pool; returns the
// allocation.
resource::Allocation take(resource::NodePool& pool, Rank rank, int cores,
                          std::uint64_t memory = 0) {
  resource::NodeAllocation part;
  part.rank = rank;
  part.memory_bytes = memory;
  const resource::NodeState* node = pool.find(rank);
  for (int c = 0; c < node->total_cores() && static_cast<int>(part.cores.size()) < cores; ++c) {
    if (node->core_free(c)) part.cores.push_back(c);
  }
  resource::Allocation a{{part}};
  EXPECT_TRUE(pool.allocate(a).is_ok());
  return a;
}

std::vector<const resource::NodeState*> all(const resource::NodePool& pool) {
  std::vector<const resource::NodeState*> out;
  for (const auto& n : pool.nodes()) out.push_back(&n);
  return out;
}

resource::ResourceRequest req(int ntasks, int nodes = 0, std::uint64_t mem = 0) {
  resource::ResourceRequest r;
  r.ntasks = ntasks;
  r.nodes = nodes;
  r.mem_per_node_bytes = mem;
  return r;
}

TEST(Planner, ReleasesCountFromTheirEnd) {
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  const resource::Allocation running = take(pool, 1, 6);
  Planner planner(pool, kNow);
  planner.add_release(running, at(100));
  EXPECT_EQ(planner.free_cores_now(), 2);
  EXPECT_EQ(planner.min_free(1, kNow, at(100))->cores, 2);
  EXPECT_EQ(planner.min_free(1, at(100), at(200))->cores, 8);
  EXPECT_FALSE(planner.min_free(9, kNow, at(1)).has_value());

  auto slot = planner.earliest(req(7), secs(50), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(100));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{1, 7, 0}}));
  slot = planner.earliest(req(2), secs(5000), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, kNow);
  EXPECT_FALSE(planner.earliest(req(9), secs(1), all(pool)).has_value());
  EXPECT_FALSE(planner.earliest(req(0), secs(1), all(pool)).has_value());  // malformed
}

TEST(Planner, ReservationsHoldTheirWindow) {
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  const resource::Allocation running = take(pool, 1, 4);
  Planner planner(pool, kNow);
  planner.add_release(running, at(100));
  const NodeShare six{1, 6, 0};
  planner.reserve({&six, 1}, at(100), at(200));
  EXPECT_EQ(planner.min_free(1, at(100), at(200))->cores, 2);
  EXPECT_EQ(planner.min_free(1, at(200), at(300))->cores, 8);
  // Ends exactly when the reservation starts: not limited; a second later,
  // 2 of the 4 free cores are the reservation's.
  EXPECT_TRUE(planner.limits(at(100)).empty());
  const std::vector<NodeShare> limits = planner.limits(at(101));
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0].rank, 1u);
  EXPECT_EQ(limits[0].cores, 2);
  EXPECT_EQ(limits[0].memory_bytes,
            pool.find(1)->free_memory());  // none reserved

  auto slot = planner.earliest(req(4), secs(150), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(200));
  slot = planner.earliest(req(2), secs(10'000), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, kNow);  // within the 2 extra cores

  // A reservation without an end holds its cores for good.
  const NodeShare two{1, 2, 0};
  planner.reserve({&two, 1}, at(300), kForever);
  EXPECT_EQ(planner.earliest(req(8), secs(1), all(pool))->start, at(200));
  EXPECT_FALSE(planner.earliest(req(8), secs(1000), all(pool)).has_value());
}

TEST(Planner, OverdueAndEndlessJobs) {
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  const resource::Allocation overdue = take(pool, 1, 4);
  const resource::Allocation endless = take(pool, 1, 2);
  Planner planner(pool, kNow);
  planner.add_release(overdue, kNow - secs(5));
  planner.add_release(endless, kForever);
  EXPECT_EQ(planner.earliest(req(6), secs(10), all(pool))->start, kNow + kOverdueGrace);
  EXPECT_FALSE(planner.earliest(req(7), secs(10), all(pool)).has_value());
}

TEST(Planner, StartTakesNowAndGivesBack) {
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  Planner planner(pool, kNow);
  planner.start(take(pool, 1, 3), at(50));
  EXPECT_EQ(planner.free_cores_now(), 5);
  EXPECT_EQ(planner.min_free(1, kNow, at(50))->cores, 5);
  EXPECT_EQ(planner.earliest(req(8), secs(1), all(pool))->start, at(50));
}

TEST(Planner, PicksNodesAsTheAllocatorDoes) {
  resource::NodePool pool = cluster(3, "core:4 pu:1");
  // Free: node 1 2 cores, node 2 3, node 3 4.
  (void)take(pool, 1, 2);
  (void)take(pool, 2, 1);
  Planner planner(pool, kNow);
  // Fewest nodes: no node holds 6, the two roomiest (nodes 2 and 3) do.
  auto slot = planner.earliest(req(6), secs(10), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{2, 3, 0}, {3, 3, 0}}));
  // One node holds it: the first that does.
  EXPECT_EQ(planner.earliest(req(3), secs(10), all(pool))->nodes,
            (std::vector<NodeShare>{{2, 3, 0}}));
  // nodes = 2, 7 tasks: 4 + 3; node 1 (2 free) cannot take 3, the extra
  // task goes to the first node that holds it.
  EXPECT_EQ(planner.earliest(req(7, 2), secs(10), all(pool))->nodes,
            (std::vector<NodeShare>{{2, 3, 0}, {3, 4, 0}}));
  // Candidates in another preference order.
  std::vector<const resource::NodeState*> reversed = all(pool);
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(planner.earliest(req(2, 2), secs(10), reversed)->nodes,
            (std::vector<NodeShare>{{3, 1, 0}, {2, 1, 0}}));
  // Too few candidates for a 3-node job.
  EXPECT_FALSE(planner.earliest(req(3, 3), secs(10), {reversed.data(), 2}).has_value());
}

TEST(Planner, GangWaitsForItsLastNode) {
  resource::NodePool pool = cluster(3, "core:4 pu:1");
  const resource::Allocation a3 = take(pool, 3, 4);
  const resource::Allocation a1 = take(pool, 1, 4);
  const resource::Allocation a2 = take(pool, 2, 4);
  Planner planner(pool, kNow);
  planner.add_release(a3, at(10));
  planner.add_release(a1, at(30));
  planner.add_release(a2, at(20));
  auto slot = planner.earliest(req(8, 2), secs(5), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(20));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{2, 4, 0}, {3, 4, 0}}));
  // Node 2 is reserved again from +25 s: a 10 s gang now needs node 1.
  const NodeShare two{2, 4, 0};
  planner.reserve({&two, 1}, at(25), at(100));
  slot = planner.earliest(req(8, 2), secs(10), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(30));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{1, 4, 0}, {3, 4, 0}}));
  EXPECT_EQ(planner.earliest(req(12, 3), secs(10), all(pool))->start, at(100));
}

TEST(Planner, MemoryIsPlannedToo) {
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  const std::uint64_t total = pool.find(1)->free_memory();
  ASSERT_GT(total, 0u);
  const resource::Allocation running = take(pool, 1, 1, total);
  Planner planner(pool, kNow);
  planner.add_release(running, at(100));
  // 7 cores are free now, but no memory until +100 s.
  EXPECT_EQ(planner.earliest(req(1, 0, total / 2), secs(10), all(pool))->start, at(100));
  EXPECT_EQ(planner.earliest(req(1), secs(10), all(pool))->start, kNow);
  const NodeShare half{1, 1, total / 2};
  planner.reserve({&half, 1}, at(100), at(200));
  EXPECT_EQ(planner.earliest(req(1, 0, total), secs(10), all(pool))->start, at(200));
}

TEST(Planner, UnschedulableNodesGetNothing) {
  resource::NodePool pool = cluster(2, "core:4 pu:1");
  pool.set_schedulable(1, false);
  Planner planner(pool, kNow);
  EXPECT_EQ(planner.free_cores_now(), 4);
  EXPECT_EQ(planner.earliest(req(2), secs(1), all(pool))->nodes,
            (std::vector<NodeShare>{{2, 2, 0}}));
  EXPECT_FALSE(planner.earliest(req(5), secs(1), all(pool)).has_value());
}

TEST(Planner, AdvanceReservationsBlockWholeNodes) {
  // Two idle 4-core nodes; node 1 is kept for [+100 s, +200 s) for someone
  // else.
  resource::NodePool pool = cluster(2, "core:4 pu:1");
  Planner planner(pool, kNow);
  const Rank one = 1;
  const std::size_t id = planner.add_block({&one, 1}, at(100), at(200));
  EXPECT_EQ(id, 0u);
  // Counted changes do not see it; min_free is about counts only.
  EXPECT_EQ(planner.min_free(1, at(100), at(200))->cores, 4);

  // A short job ends before the window: node 1 is fine.
  EXPECT_EQ(planner.earliest(req(4), secs(100), all(pool))->nodes,
            (std::vector<NodeShare>{{1, 4, 0}}));
  // A longer one goes to node 2 now...
  auto slot = planner.earliest(req(4), secs(150), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, kNow);
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{2, 4, 0}}));
  // ... and, node 2 taken until +1000 s, after the window on node 1.
  const NodeShare node2{2, 4, 0};
  planner.reserve({&node2, 1}, kNow, at(1000));
  slot = planner.earliest(req(4), secs(150), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(200));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{1, 4, 0}}));
  // Both nodes: not before the window ends.
  EXPECT_EQ(planner.earliest(req(8, 2), secs(10), all(pool))->start, at(1000));
  // A job the reservation admits is not stopped by it.
  const std::size_t admitted[] = {id};
  EXPECT_EQ(planner.earliest(req(4), secs(150), all(pool), admitted)->start, kNow);

  // Started now, a job that ends after +100 s gets nothing of node 1 (node
  // 2's cores are reserved from now on, its memory is not).
  const auto cores = [](const std::vector<NodeShare>& limits) {
    std::vector<std::pair<Rank, int>> out;
    for (const NodeShare& l : limits) out.emplace_back(l.rank, l.cores);
    return out;
  };
  using Cores = std::vector<std::pair<Rank, int>>;
  EXPECT_EQ(cores(planner.limits(at(100))), (Cores{{2, 0}}));
  EXPECT_EQ(planner.limits(at(101)).front(), (NodeShare{1, 0, 0}));
  EXPECT_EQ(cores(planner.limits(at(101))), (Cores{{1, 0}, {2, 0}}));
  EXPECT_EQ(cores(planner.limits(at(101), admitted)), (Cores{{2, 0}}));
  // Blocks for unknown ranks and empty windows stop nothing.
  const Rank nine = 9;
  EXPECT_EQ(planner.add_block({&nine, 1}, at(1), at(2)), 1u);
  EXPECT_EQ(planner.add_block({&one, 1}, at(5), at(5)), 2u);
  EXPECT_EQ(planner.earliest(req(4), secs(1), all(pool))->start, kNow);
}

TEST(Planner, BlockInForceNowAndUnderReservations) {
  // One 8-core node, 4 cores busy until +50 s, the node kept [now - 10 s,
  // +30 s): nothing starts on it before +30 s, and a job of 60 s fits at +50 s
  // only.
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  const resource::Allocation running = take(pool, 1, 4);
  Planner planner(pool, kNow);
  planner.add_release(running, at(50));
  const Rank one = 1;
  (void)planner.add_block({&one, 1}, kNow - secs(10), at(30));
  EXPECT_EQ(planner.earliest(req(4), secs(60), all(pool))->start, at(30));
  EXPECT_EQ(planner.earliest(req(8), secs(60), all(pool))->start, at(50));
  EXPECT_EQ(planner.limits(at(1)), (std::vector<NodeShare>{{1, 0, 0}}));
}

// A reference for earliest(): every candidate time, every node's window
// recomputed from the list of changes, the allocator's rules on counts. The
// planner must give the same start and nodes.
struct Model {
  struct Node {
    Rank rank;
    int free;
    std::vector<std::pair<TimeUs, int>> changes;
    std::vector<std::tuple<TimeUs, TimeUs, std::size_t>> blocks;
  };
  std::vector<Node> nodes;

  Node& at_rank(Rank r) { return nodes[r - 1]; }

  // The profile, in seconds from now, for a failure message.
  std::string describe() const {
    std::string d;
    const auto secs_from_now = [](TimeUs t) { return std::to_string((t - kNow) / kUsPerSecond); };
    for (const Node& n : nodes) {
      d += "\n node " + std::to_string(n.rank) + " free " + std::to_string(n.free);
      for (const auto& [time, cores] : n.changes)
        d += " (" + secs_from_now(time) + ", " + std::to_string(cores) + ")";
      for (const auto& [start, end, id] : n.blocks)
        d += " block " + std::to_string(id) + " [" + secs_from_now(start) + ", " +
             secs_from_now(end) + ")";
    }
    return d;
  }

  std::optional<Slot> earliest(const resource::ResourceRequest& request, TimeUs duration,
                               const std::vector<std::size_t>& admitted) const {
    std::vector<TimeUs> times{kNow};
    for (const Node& n : nodes) {
      for (const auto& c : n.changes) {
        if (c.first > kNow) times.push_back(c.first);
      }
      for (const auto& [s, e, id] : n.blocks) {
        if (e > kNow) times.push_back(e);
      }
    }
    std::sort(times.begin(), times.end());
    for (TimeUs t : times) {
      const TimeUs end = add_time(t, duration);
      std::vector<int> caps;
      for (const Node& n : nodes) {
        int level = n.free;
        for (const auto& c : n.changes)
          if (c.first <= t) level += c.second;
        int least = level;
        for (const auto& c : n.changes) {
          if (c.first <= t || c.first >= end) continue;
          int l = n.free;
          for (const auto& d : n.changes)
            if (d.first <= c.first) l += d.second;
          least = std::min(least, l);
        }
        for (const auto& [s, e, id] : n.blocks) {
          if (s < end && e > t && !std::binary_search(admitted.begin(), admitted.end(), id))
            least = 0;
        }
        caps.push_back(std::max(least, 0) / request.cpus_per_task);
      }
      std::vector<NodeShare> out;
      const auto share = [&](std::size_t i, int tasks) {
        return NodeShare{nodes[i].rank, tasks * request.cpus_per_task, 0};
      };
      if (request.nodes > 0) {
        const int base = request.ntasks / request.nodes;
        const int extra = request.ntasks % request.nodes;
        int big = 0;
        int small = 0;
        for (std::size_t i = 0; i < caps.size() && big + small < request.nodes; ++i) {
          if (caps[i] >= base + 1 && big < extra) {
            out.push_back(share(i, base + 1));
            ++big;
          } else if (caps[i] >= base && small < request.nodes - extra) {
            out.push_back(share(i, base));
            ++small;
          }
        }
        if (big + small < request.nodes) out.clear();
      } else {
        for (std::size_t i = 0; i < caps.size() && out.empty(); ++i) {
          if (caps[i] >= request.ntasks) out.push_back(share(i, request.ntasks));
        }
        if (out.empty()) {
          std::vector<std::size_t> idx(caps.size());
          for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
          std::stable_sort(idx.begin(), idx.end(),
                           [&](std::size_t a, std::size_t b) { return caps[a] > caps[b]; });
          int covered = 0;
          std::vector<std::size_t> chosen;
          for (std::size_t i : idx) {
            if (covered >= request.ntasks || caps[i] == 0) break;
            chosen.push_back(i);
            covered += caps[i];
          }
          if (covered >= request.ntasks) {
            std::sort(chosen.begin(), chosen.end());
            int left = request.ntasks;
            for (std::size_t i : chosen) {
              out.push_back(share(i, std::min(caps[i], left)));
              left -= std::min(caps[i], left);
            }
          }
        }
      }
      if (!out.empty()) return Slot{t, out};
    }
    return std::nullopt;
  }
};

TEST(Planner, SweepMatchesAFullRescanOnRandomProfiles) {
  std::mt19937 rng(17);
  const auto uniform = [&rng](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  int found = 0;
  for (int round = 0; round < 200; ++round) {
    const int n = uniform(1, 6);
    resource::NodePool pool = cluster(n, "core:8 pu:1");
    Model model;
    std::vector<std::pair<resource::Allocation, TimeUs>> running;
    for (int i = 0; i < 3 * n; ++i) {
      const auto rank = static_cast<Rank>(uniform(1, n));
      const int cores = std::min(uniform(1, 4), pool.find(rank)->free_cores());
      if (cores == 0) continue;
      const int kind = uniform(0, 9);
      const TimeUs end = kind == 0   ? kForever
                         : kind == 1 ? kNow - secs(3)
                                     : at(uniform(1, 40) * 10);
      running.emplace_back(take(pool, rank, cores), end);
    }
    for (int i = 1; i <= n; ++i) {
      model.nodes.push_back(
          {static_cast<Rank>(i), pool.find(static_cast<Rank>(i))->free_cores(), {}, {}});
    }
    Planner planner(pool, kNow);
    for (const auto& [allocation, end] : running) {
      planner.add_release(allocation, end);
      if (end == kForever) continue;
      const TimeUs when = end <= kNow ? kNow + kOverdueGrace : end;
      for (const auto& part : allocation.nodes)
        model.at_rank(part.rank).changes.emplace_back(when, static_cast<int>(part.cores.size()));
    }
    const int blocks = uniform(0, 2);
    for (int b = 0; b < blocks; ++b) {
      std::vector<Rank> ranks;
      for (int i = 1; i <= n; ++i)
        if (uniform(0, 1) == 1) ranks.push_back(static_cast<Rank>(i));
      const TimeUs start = at(uniform(-5, 30) * 10);
      const TimeUs end = start + secs(uniform(1, 20) * 10);
      const std::size_t id = planner.add_block(ranks, start, end);
      if (end <= kNow) continue;
      for (Rank r : ranks) model.at_rank(r).blocks.emplace_back(start, end, id);
    }
    std::vector<const resource::NodeState*> nodes = all(pool);
    for (int q = 0; q < 12; ++q) {
      resource::ResourceRequest r = req(uniform(1, 12), uniform(0, std::min(n, 3)));
      if (r.nodes > r.ntasks) r.nodes = r.ntasks;
      if (uniform(0, 3) == 0) r.cpus_per_task = 2;
      const TimeUs duration = uniform(0, 9) == 0 ? kForever : secs(uniform(1, 30) * 10);
      std::vector<std::size_t> admitted;
      if (blocks > 0 && uniform(0, 2) == 0) admitted.push_back(0);
      const auto want = model.earliest(r, duration, admitted);
      const auto got = planner.earliest(r, duration, nodes, admitted);
      ASSERT_EQ(got.has_value(), want.has_value()) << "round " << round << " query " << q;
      if (!got) continue;
      ++found;
      ASSERT_EQ(got->start, want->start)
          << "round " << round << " query " << q << ": " << model.describe();
      ASSERT_EQ(got->nodes, want->nodes) << "round " << round << " query " << q;
      // Conservative: the slot becomes a reservation the next query sees.
      if (uniform(0, 1) == 1) {
        planner.reserve(got->nodes, got->start, add_time(got->start, duration));
        for (const NodeShare& share : got->nodes) {
          model.at_rank(share.rank).changes.emplace_back(got->start, -share.cores);
          if (duration != kForever)
            model.at_rank(share.rank)
                .changes.emplace_back(add_time(got->start, duration), share.cores);
        }
      }
    }
  }
  EXPECT_GT(found, 1000);
}

}  // namespace
}  // namespace hpcq::sched
