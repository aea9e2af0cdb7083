#include "daemon/recovery.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include <google/protobuf/util/json_util.h>

#include "daemon/checkpoints.h"
#include "daemon/leadership.h"
#include "daemon/steps.h"
#include "daemon/usage_record.h"
#include "lib/api/job_proto.h"
#include "lib/store/codec.h"
#include "lib/store/etcd_store.h"
#include "lib/store/sqlite_store.h"

namespace hpcq::daemon {
namespace {

// A record's protobuf JSON. A field a newer leader wrote (before a
// rollback) is not a reason to lose the record.
bool parse_stored(const std::string& json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  return google::protobuf::util::JsonStringToMessage(json, message, options).ok();
}

// A job's records of one kind ("checkpoint", "placement", "resize"), kept
// under "<job>/<n>" as the public API's message in protobuf JSON: typed and
// appended to `list` of each known job, in key order (callers sort by time).
template <typename Message, typename Record>
Status load_job_records(store::Store& store, const char* kind, JobTable& table,
                        std::vector<Record> JobEntry::*list) {
  auto stored = store.load_records(kind);
  if (!stored.is_ok()) return stored.status();
  for (const auto& [key, value] : *stored) {
    Message message;
    JobEntry* entry = table.find(std::strtoull(key.c_str(), nullptr, 10));
    Result<Record> record = invalid_argument("not JSON of its message");
    if (entry != nullptr && parse_stored(value, &message)) {
      record = api::from_proto(message);
    }
    if (entry == nullptr || !record.is_ok()) {
      spdlog::warn("store: {} record {} ignored{}", kind, key,
                   entry == nullptr ? "" : ": " + record.status().message());
      continue;
    }
    (entry->*list).push_back(std::move(record).value());
  }
  return Status::ok();
}

// The configured nodes, each with its state as the store kept it: a drain
// outlives restarts, and the agent's incarnation tells a restarted agent
// from the same one.
Status load_nodes(Context& ctx, store::Store& store) {
  if (ctx.config.ranks.empty()) return invalid_argument("config: no ranks");
  auto stored_nodes = store.load_nodes();
  if (!stored_nodes.is_ok()) return stored_nodes.status();
  for (Rank r = 1; r < ctx.config.ranks.size(); ++r) {
    NodeEntry node;
    node.rank = r;
    node.name = ctx.config.ranks[r].name;
    node.features = ctx.config.ranks[r].features;
    node.gres = ctx.config.ranks[r].gres;
    node.last_seen = ctx.now();
    ctx.nodes.emplace(r, std::move(node));
  }
  for (const auto& n : *stored_nodes) {
    auto node = ctx.nodes.find(n.rank);
    if (node == ctx.nodes.end()) continue;
    if (n.state == "drain") {
      node->second.drained = true;
      node->second.reason = "drained before the leader restarted";
    }
    auto detail = store::decode_node_detail(n.topology_json);
    if (detail.is_ok()) {
      node->second.incarnation = detail->incarnation;
    } else {
      spdlog::warn("store: node {}: {}", n.name, detail.status().message());
    }
  }
  ctx.node_shapes.assign(ctx.nodes.size(), std::nullopt);  // not heard from yet: could be anything
  return Status::ok();
}

// Each job's steps ("step" records, "<job>/<step>"): a running step stays
// running where it was (its agents report its end), a pending one waits on.
Status load_steps(Context& ctx, store::Store& store) {
  auto stored = store.load_records("step");
  if (!stored.is_ok()) return stored.status();
  for (const auto& [key, value] : *stored) {
    v1::Step record;
    JobEntry* entry = ctx.table.find(std::strtoull(key.c_str(), nullptr, 10));
    auto step = entry == nullptr || !parse_stored(value, &record)
                    ? Result<job::StepRecord>(invalid_argument("unreadable"))
                    : api::from_proto(record);
    if (!step.is_ok() || step->id == 0) {
      spdlog::warn("store: step record {} ignored", key);
      continue;
    }
    std::vector<job::StepRecord>& steps = entry->steps;
    if (steps.size() < step->id) steps.resize(step->id);
    steps[step->id - 1] = std::move(step).value();
  }
  for (auto& [id, entry] : ctx.table.jobs()) Steps::restore(entry);
  return Status::ok();
}

// Each job's checkpoint, placement and resize records ("<job>/<n>"), and
// what they say of its next start or its run.
Status load_job_history(Context& ctx, store::Store& store) {
  HPCQ_RETURN_IF_ERROR(load_job_records<v1::CheckpointRecord>(store, "checkpoint", ctx.table,
                                                              &JobEntry::checkpoints));
  HPCQ_RETURN_IF_ERROR(
      load_job_records<v1::Placement>(store, "placement", ctx.table, &JobEntry::placements));
  for (auto& [id, entry] : ctx.table.jobs()) {
    std::sort(entry.checkpoints.begin(), entry.checkpoints.end(),
              [](const auto& a, const auto& b) { return a.time_us < b.time_us; });
    std::sort(entry.placements.begin(), entry.placements.end(),
              [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
    Checkpoints::resume_in_flight(entry, ctx.now());
    // A pending job whose last checkpoint took it off its nodes and has not
    // been restored yet, or that waits to restart from a checkpoint after a
    // node loss, is restored where it next starts.
    if (entry.job.state == job::JobState::kPending) {
      job::NextRestore next = job::next_restore(entry.checkpoints);
      entry.restore_from = std::move(next.image);
      entry.restore_to = ranks_of(ctx.nodes, next.to);
    }
    if (entry.job.state == job::JobState::kRunning && !entry.placements.empty() &&
        entry.placements.back().end_us == 0) {
      entry.restored_image = entry.placements.back().restored_from;
      entry.restoring = !entry.restored_image.empty();
    }
  }
  // Resize records are kept as checkpoint records are: "<job>/<n>".
  HPCQ_RETURN_IF_ERROR(
      load_job_records<v1::ResizeRecord>(store, "resize", ctx.table, &JobEntry::resizes));
  for (auto& [id, entry] : ctx.table.jobs()) {
    std::sort(entry.resizes.begin(), entry.resizes.end(),
              [](const auto& a, const auto& b) { return a.time_us < b.time_us; });
    if (!entry.resizes.empty()) {
      entry.last_resize = entry.resizes.back().answered_us;
      // The segments before it were charged then (the ledger is saved
      // every 10 s, so at most those seconds are lost or counted twice).
      entry.usage_from = entry.last_resize;
    }
  }
  return load_steps(ctx, store);
}

}  // namespace

Result<Recovered> recover(Context& ctx, const StoreGuard& guard) {
  Recovered out;
  if (ctx.config.store == "etcd") {
    auto client =
        etcd::EtcdClient::connect(ctx.config.etcd_endpoints, Leadership::etcd_options(ctx.config));
    if (!client.is_ok()) return client.status();
    store::EtcdStore::Options options;
    options.prefix = ctx.config.etcd_prefix;
    options.guard_key = guard.key;
    options.guard_revision = guard.revision;
    // Nothing this hpcqd holds in memory may be acted on any more.
    options.on_deposed = &Leadership::step_down;
    if (!ctx.config.store_key.empty()) {
      auto sealer = store::Sealer::from_file(ctx.config.store_key);
      if (!sealer.is_ok()) return sealer.status();
      options.sealer = std::move(sealer).value();
    }
    // What hpcqd did not write (a forger's job of another owner) is never run.
    options.on_refused = [](const std::string& key, const std::string& why) {
      spdlog::error("hpcqd: store row {} refused: {}", key, why);
    };
    auto opened = store::EtcdStore::open(std::move(client).value(), std::move(options));
    if (!opened.is_ok()) return opened.status();
    out.store = std::move(opened).value();
  } else {
    auto opened = store::SqliteStore::open(ctx.config.state_dir + "/hpcq.db");
    if (!opened.is_ok()) return opened.status();
    out.store = std::move(opened).value();
  }
  store::Store* store = out.store.get();
  HPCQ_RETURN_IF_ERROR(load_nodes(ctx, *store));
  auto jobs = store->load_jobs();
  if (!jobs.is_ok()) return jobs.status();
  auto max_id = store->max_job_id();
  if (!max_id.is_ok()) return max_id.status();
  out.next_job_id = *max_id + 1;
  for (job::Job& job : *jobs) {
    job.spec.env = ctx.environments.intern(job.spec.env);
    JobEntry& entry = ctx.table.insert(std::move(job));
    ctx.table.load(entry);
    if (!entry.job.spec.submission_key.empty()) {
      ctx.submission_keys.loaded(entry.job.uid, entry.job.spec.submission_key, entry.job.id);
    }
    for (Rank rank : entry.running_on) {
      if (auto node = ctx.nodes.find(rank); node != ctx.nodes.end()) node->second.awaited = true;
    }
  }
  // Once every job is known, so that dependencies can be judged; carried out
  // once the store's writer runs.
  out.ready = ctx.table.ready_loaded(ctx.now());
  auto stored_usage = store->load_records("usage");
  if (!stored_usage.is_ok()) return stored_usage.status();
  for (const auto& [key, value] : *stored_usage) {
    auto entries = decode_usage(value);
    if (!entries.is_ok()) return invalid_argument("store: usage: " + entries.status().message());
    ctx.usage.restore(*entries);
  }
  HPCQ_RETURN_IF_ERROR(load_job_history(ctx, *store));
  auto stored_reservations = store->load_records("reservation");
  if (!stored_reservations.is_ok()) return stored_reservations.status();
  for (const auto& [name, value] : *stored_reservations) {
    auto r = decode_reservation(value);
    if (!r.is_ok())
      return invalid_argument("store: reservation " + name + ": " + r.status().message());
    ctx.reservations.emplace(name, std::move(r).value());
  }
  spdlog::info("store: {} jobs loaded ({} pending, {} running), next job id {}",
               ctx.table.jobs().size(), ctx.table.pending().size(), ctx.table.running().size(),
               out.next_job_id);
  return out;
}

}  // namespace hpcq::daemon
