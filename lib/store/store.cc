#include "lib/store/store.h"

#include <utility>

namespace hpcq::store {

void WriteBatch::insert_job(const job::Job& job) { ops_.emplace_back(InsertJob{job}); }

void WriteBatch::update_job(const job::Job& job) { ops_.emplace_back(UpdateJob{job}); }

void WriteBatch::append_event(JobId job_id, TimeUs time, std::string name,
                              std::string detail_json) {
  ops_.emplace_back(AppendEvent{job_id, time, std::move(name), std::move(detail_json)});
}

void WriteBatch::upsert_node(Rank rank, std::string name, std::string state,
                             std::string topology_json, TimeUs time) {
  ops_.emplace_back(
      UpsertNode{rank, std::move(name), std::move(state), std::move(topology_json), time});
}

void WriteBatch::put_record(std::string kind, std::string key, std::string value_json) {
  ops_.emplace_back(PutRecord{std::move(kind), std::move(key), std::move(value_json)});
}

void WriteBatch::delete_record(std::string kind, std::string key) {
  ops_.emplace_back(DeleteRecord{std::move(kind), std::move(key)});
}

void WriteBatch::append(WriteBatch&& other) {
  if (ops_.empty()) {
    ops_ = std::move(other.ops_);
  } else {
    ops_.reserve(ops_.size() + other.ops_.size());
    for (Op& op : other.ops_) ops_.push_back(std::move(op));
  }
  other.ops_.clear();
}

}  // namespace hpcq::store
