#include "lib/store/etcd_store.h"

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <variant>

#include "lib/store/codec.h"

namespace hpcq::store {
namespace {

constexpr std::size_t kJobColumns = 16;

// Zero-padded so that keys sort as their numbers.
std::string padded(std::uint64_t n) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%020" PRIu64, n);
  return buf;
}

// A row: each column as its length in decimal, ':', then its bytes.
std::string encode_row(std::initializer_list<std::string_view> columns) {
  std::string out;
  for (std::string_view c : columns) {
    out += std::to_string(c.size());
    out += ':';
    out += c;
  }
  return out;
}

Result<std::vector<std::string>> decode_row(std::string_view row, std::size_t columns) {
  std::vector<std::string> out;
  while (!row.empty()) {
    const std::size_t colon = row.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon > 10) break;
    std::size_t length = 0;
    for (char c : row.substr(0, colon)) {
      if (c < '0' || c > '9') return invalid_argument("a column's length is not a number");
      length = length * 10 + static_cast<std::size_t>(c - '0');
    }
    if (length > row.size() - colon - 1) return invalid_argument("a column runs past the row");
    out.emplace_back(row.substr(colon + 1, length));
    row.remove_prefix(colon + 1 + length);
  }
  if (!row.empty()) return invalid_argument("a column has no length");
  if (out.size() != columns) {
    return invalid_argument("has " + std::to_string(out.size()) + " columns, not " +
                            std::to_string(columns));
  }
  return out;
}

Result<std::int64_t> number(const std::string& text) {
  std::int64_t n = 0;
  const char* end = text.data() + text.size();
  auto [stop, ec] = std::from_chars(text.data(), end, n);
  if (text.empty() || ec != std::errc() || stop != end) {
    return invalid_argument("'" + text + "' is not a number");
  }
  return n;
}

std::string encode_job(const job::Job& j) {
  const std::string id = std::to_string(j.id), uid = std::to_string(j.uid),
                    gid = std::to_string(j.gid), exit_code = std::to_string(j.exit_code),
                    submit = std::to_string(j.submit_time), start = std::to_string(j.start_time),
                    end = std::to_string(j.end_time), requeues = std::to_string(j.requeue_count),
                    cpu = std::to_string(j.cpu_time_us),
                    memory = std::to_string(j.max_memory_bytes);
  return encode_row({id, uid, gid, j.user, encode_state(j.state), exit_code, j.reason,
                     encode_spec(j.spec), encode_allocation(j.allocation), submit, start, end,
                     requeues, j.held ? "1" : "0", cpu, memory});
}

Result<job::Job> decode_job(std::string_view value) {
  auto row = decode_row(value, kJobColumns);
  if (!row.is_ok()) return row.status();
  const std::vector<std::string>& c = *row;
  std::int64_t n[kJobColumns] = {};
  for (std::size_t i : {0, 1, 2, 5, 9, 10, 11, 12, 13, 14, 15}) {
    auto parsed = number(c[i]);
    if (!parsed.is_ok()) return parsed.status();
    n[i] = *parsed;
  }
  job::Job j;
  j.id = static_cast<JobId>(n[0]);
  j.uid = static_cast<std::uint32_t>(n[1]);
  j.gid = static_cast<std::uint32_t>(n[2]);
  j.user = c[3];
  auto state = decode_state(c[4]);
  if (!state.is_ok()) return state.status();
  j.state = *state;
  j.exit_code = static_cast<int>(n[5]);
  j.reason = c[6];
  auto spec = decode_spec(c[7]);
  if (!spec.is_ok()) return spec.status();
  j.spec = std::move(spec).value();
  auto allocation = decode_allocation(c[8]);
  if (!allocation.is_ok()) return allocation.status();
  j.allocation = std::move(allocation).value();
  j.submit_time = n[9];
  j.start_time = n[10];
  j.end_time = n[11];
  j.requeue_count = static_cast<int>(n[12]);
  j.held = n[13] != 0;
  j.cpu_time_us = n[14];
  j.max_memory_bytes = static_cast<std::uint64_t>(n[15]);
  return j;
}

// What the Txn requires of a job's row before it applies.
struct RowCheck {
  bool must_exist;
  std::string what;  // "insert job 7", for the error
};

}  // namespace

Result<std::unique_ptr<EtcdStore>> EtcdStore::open(etcd::EtcdClient client, Options options) {
  std::unique_ptr<EtcdStore> store(new EtcdStore(std::move(client), std::move(options)));
  auto high = store->get_opened(store->options_.prefix + "meta/max_job_id");
  if (!high.is_ok()) return store->error("open", high.status());
  if (high->has_value()) {
    auto n = number(**high);
    if (!n.is_ok()) return store->error("open: meta/max_job_id", n.status());
    store->max_job_id_ = static_cast<JobId>(*n);
  }
  return store;
}

Status EtcdStore::error(const std::string& what, const Status& s) const {
  std::string message = s.message();
  // The client's messages name etcd and its endpoints already.
  if (message.rfind("etcd ", 0) != 0) message = place() + ": " + message;
  return Status(s.code(), "store " + what + ": " + message);
}

Result<std::vector<etcd::KeyValue>> EtcdStore::range_opened(const std::string& prefix) {
  auto rows = client_.range(prefix);
  if (!rows.is_ok() || !options_.sealer) return rows;
  std::vector<etcd::KeyValue> opened;
  opened.reserve(rows->size());
  for (etcd::KeyValue& kv : *rows) {
    auto value = options_.sealer->open(kv.key, kv.value);
    if (!value.is_ok()) {
      if (options_.on_refused) options_.on_refused(kv.key, value.status().message());
      continue;
    }
    kv.value = std::move(value).value();
    opened.push_back(std::move(kv));
  }
  return opened;
}

Result<std::optional<std::string>> EtcdStore::get_opened(const std::string& key) {
  auto kv = client_.get(key);
  if (!kv.is_ok()) return kv.status();
  if (!kv->has_value()) return std::optional<std::string>();
  if (!options_.sealer) return std::optional<std::string>((*kv)->value);
  auto value = options_.sealer->open(key, (*kv)->value);
  if (!value.is_ok()) {
    return permission_denied(key + ": " + value.status().message());
  }
  return std::optional<std::string>(std::move(value).value());
}

std::string EtcdStore::job_key(JobId id) const { return options_.prefix + "jobs/" + padded(id); }

std::string EtcdStore::events_prefix(JobId id) const {
  return options_.prefix + "events/" + padded(id) + "/";
}

Result<std::int64_t> EtcdStore::next_event_seq(JobId id) {
  if (auto it = next_seq_.find(id); it != next_seq_.end()) return it->second;
  auto events = client_.range(events_prefix(id));
  if (!events.is_ok()) return events.status();
  std::int64_t next = 1;
  if (!events->empty()) {
    auto last = number(events->back().key.substr(events_prefix(id).size()));
    if (!last.is_ok()) return last.status();
    next = *last + 1;
  }
  next_seq_[id] = next;
  return next;
}

Status EtcdStore::write_all(std::span<const WriteBatch> batches) {
  // etcd refuses two operations on one key in a Txn: the batch is reduced to
  // each key's last write, and each job row's check on the state before it.
  std::map<std::string, std::optional<std::string>> writes;  // nullopt: erase
  std::map<std::string, RowCheck> checks;
  std::set<std::string> inserted;
  std::map<JobId, std::int64_t> seqs;  // the next seq of each job written to
  JobId high = max_job_id_;
  auto check = [&](const std::string& key, bool must_exist, std::string what) {
    if (!inserted.count(key) && !checks.count(key)) checks[key] = {must_exist, std::move(what)};
  };
  for (const WriteBatch& batch : batches) {
    for (const WriteBatch::Op& op : batch.ops()) {
      if (const auto* insert = std::get_if<WriteBatch::InsertJob>(&op)) {
        const std::string key = job_key(insert->job.id);
        check(key, false, "insert job " + std::to_string(insert->job.id));
        inserted.insert(key);
        writes[key] = encode_job(insert->job);
        high = std::max(high, insert->job.id);
      } else if (const auto* update = std::get_if<WriteBatch::UpdateJob>(&op)) {
        const std::string key = job_key(update->job.id);
        check(key, true, "update job " + std::to_string(update->job.id));
        writes[key] = encode_job(update->job);
      } else if (const auto* event = std::get_if<WriteBatch::AppendEvent>(&op)) {
        const std::string key = job_key(event->job_id);
        check(key, true,
              "append event '" + event->name + "' to job " + std::to_string(event->job_id));
        // A job inserted in this batch has no events yet: no need to ask.
        auto seq = seqs.count(event->job_id) ? Result<std::int64_t>(seqs[event->job_id])
                   : inserted.count(key)     ? Result<std::int64_t>(1)
                                             : next_event_seq(event->job_id);
        if (!seq.is_ok())
          return error("write: events of job " + std::to_string(event->job_id), seq.status());
        seqs[event->job_id] = *seq + 1;
        const std::string time = std::to_string(event->time);
        writes[events_prefix(event->job_id) + padded(static_cast<std::uint64_t>(*seq))] =
            encode_row({time, event->name, event->detail_json});
      } else if (const auto* node = std::get_if<WriteBatch::UpsertNode>(&op)) {
        const std::string time = std::to_string(node->time);
        writes[options_.prefix + "nodes/" + padded(node->rank)] =
            encode_row({node->name, node->state, node->topology_json, time});
      } else if (const auto* put = std::get_if<WriteBatch::PutRecord>(&op)) {
        writes[options_.prefix + "records/" + put->kind + "/" + put->key] = put->value_json;
      } else {
        const auto& del = std::get<WriteBatch::DeleteRecord>(op);
        writes[options_.prefix + "records/" + del.kind + "/" + del.key] = std::nullopt;
      }
    }
  }
  if (writes.empty()) return Status::ok();
  if (high > max_job_id_) writes[options_.prefix + "meta/max_job_id"] = std::to_string(high);
  if (options_.sealer) {
    for (auto& [key, value] : writes) {
      if (value) value = options_.sealer->seal(key, *value);
    }
  }
  if (writes.size() > kMaxOps) {
    return invalid_argument("store write: " + place() + ": " + std::to_string(writes.size()) +
                            " keys in one transaction, more than " + std::to_string(kMaxOps));
  }

  etcd::Txn txn;
  using Target = etcd::Txn::Target;
  if (!options_.guard_key.empty()) {
    txn.if_equal(options_.guard_key, Target::kCreateRevision, options_.guard_revision);
  }
  for (const auto& [key, c] : checks) {
    if (c.must_exist) {
      txn.if_not_equal(key, Target::kCreateRevision, 0);
    } else {
      txn.if_equal(key, Target::kCreateRevision, 0);
    }
  }
  for (const auto& [key, value] : writes) {
    if (value) {
      txn.put(key, *value);
    } else {
      txn.erase(key);
    }
  }
  auto done = client_.txn(txn);
  if (!done.is_ok()) return error("write", done.status());
  if (!done->succeeded) {
    // A try that timed out may have been applied before the client tried
    // the next endpoint, which then found its own rows: that is success.
    bool applied = true;
    for (const auto& [key, value] : writes) {
      auto now = client_.get(key);
      if (!now.is_ok()) return error("write", now.status());
      if (value ? !now->has_value() || (*now)->value != *value : now->has_value()) {
        applied = false;
        break;
      }
    }
    if (!applied) {
      if (!options_.guard_key.empty()) {
        auto guard = client_.get(options_.guard_key);
        if (!guard.is_ok()) return error("write", guard.status());
        if (!guard->has_value() || (*guard)->create_revision != options_.guard_revision) {
          const std::string why = "store write: " + place() + ": this hpcqd no longer leads (" +
                                  options_.guard_key + " is gone or another's)";
          if (options_.on_deposed) options_.on_deposed(why);
          return failed_precondition(why);
        }
      }
      for (const auto& [key, c] : checks) {
        auto row = client_.get(key);
        if (!row.is_ok()) return error("write", row.status());
        if (row->has_value() == c.must_exist) continue;
        if (!c.must_exist) {
          return failed_precondition("store " + place() + ": " + c.what + ": the job exists");
        }
        if (c.what.rfind("update", 0) == 0) {
          return not_found("store " + place() + ": " + c.what + ": no such job");
        }
        return failed_precondition("store " + place() + ": " + c.what + ": no such job");
      }
      return unavailable("store write: " + place() + ": the rows changed under the write");
    }
  }
  for (const auto& [id, next] : seqs) next_seq_[id] = next;
  max_job_id_ = high;
  ++commits_;
  return Status::ok();
}

Result<std::vector<job::Job>> EtcdStore::load_jobs() {
  auto rows = range_opened(options_.prefix + "jobs/");
  if (!rows.is_ok()) return error("load jobs", rows.status());
  std::vector<job::Job> jobs;
  jobs.reserve(rows->size());
  for (const etcd::KeyValue& kv : *rows) {
    auto j = decode_job(kv.value);
    if (!j.is_ok()) {
      return invalid_argument("store " + place() + ": " + kv.key + ": " + j.status().message());
    }
    jobs.push_back(std::move(j).value());
  }
  return jobs;
}

Result<JobId> EtcdStore::max_job_id() { return max_job_id_; }

Result<std::vector<EventRecord>> EtcdStore::load_events(JobId job_id) {
  const std::string prefix = events_prefix(job_id);
  auto rows = range_opened(prefix);
  if (!rows.is_ok()) return error("load events of job " + std::to_string(job_id), rows.status());
  std::vector<EventRecord> events;
  for (const etcd::KeyValue& kv : *rows) {
    auto row = decode_row(kv.value, 3);
    auto seq = number(kv.key.substr(prefix.size()));
    auto time = row.is_ok() ? number((*row)[0]) : Result<std::int64_t>(row.status());
    if (!seq.is_ok() || !time.is_ok()) {
      const Status& bad = seq.is_ok() ? time.status() : seq.status();
      return invalid_argument("store " + place() + ": " + kv.key + ": " + bad.message());
    }
    events.push_back({job_id, *seq, *time, (*row)[1], (*row)[2]});
  }
  return events;
}

Result<std::vector<NodeRecord>> EtcdStore::load_nodes() {
  const std::string prefix = options_.prefix + "nodes/";
  auto rows = range_opened(prefix);
  if (!rows.is_ok()) return error("load nodes", rows.status());
  std::vector<NodeRecord> nodes;
  for (const etcd::KeyValue& kv : *rows) {
    auto row = decode_row(kv.value, 4);
    auto rank = number(kv.key.substr(prefix.size()));
    auto time = row.is_ok() ? number((*row)[3]) : Result<std::int64_t>(row.status());
    if (!rank.is_ok() || !time.is_ok()) {
      const Status& bad = rank.is_ok() ? time.status() : rank.status();
      return invalid_argument("store " + place() + ": " + kv.key + ": " + bad.message());
    }
    nodes.push_back({static_cast<Rank>(*rank), (*row)[0], (*row)[1], (*row)[2], *time});
  }
  return nodes;
}

Result<std::vector<std::pair<std::string, std::string>>> EtcdStore::load_records(
    const std::string& kind) {
  const std::string prefix = options_.prefix + "records/" + kind + "/";
  auto rows = range_opened(prefix);
  if (!rows.is_ok()) return error("load " + kind, rows.status());
  std::vector<std::pair<std::string, std::string>> records;
  for (etcd::KeyValue& kv : *rows) {
    records.emplace_back(kv.key.substr(prefix.size()), std::move(kv.value));
  }
  return records;
}

}  // namespace hpcq::store
