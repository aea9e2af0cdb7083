// Submissions made at most once: the table of idempotency keys.
//
// The hpcq command puts a random key in each submission
// (SubmitRequest.submission_key) and sends the same key again when it did
// not hear the answer (a leader killed or frozen, a lost connection, no
// answer within its time limit) and asks again, maybe another candidate.
// The leader answers a key it has seen with the jobs it made then, not new
// ones. A key is the submitting user's: the same text from another uid is
// another key, so no one learns another user's job by guessing.
//
// A key is kept as long as its jobs' records: it is stored with each job
// (JobSpec::submission_key) and a leader that loads the jobs (a restart, a
// failover) learns it from them (loaded()). A submission still being stored
// is in flight: a repeat that comes meanwhile waits for its outcome. One
// that failed (not stored) is forgotten, so that the next repeat makes the
// jobs.
//
// Pure; not thread-safe: hpcqd's loop thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"

namespace hpcq::job {

// The most characters a key may have; [0-9A-Za-z_-] only (the hpcq
// command's are 32 hex digits).
inline constexpr std::size_t kMaxSubmissionKeyChars = 64;
// kInvalidArgument naming the field when `key` is not a key (empty is none).
Status check_submission_key(std::string_view key);

class SubmissionKeys {
 public:
  // What one submission made: a job, or an array's tasks with consecutive ids.
  struct Made {
    JobId first = 0;
    std::uint32_t count = 0;
    bool operator==(const Made&) const = default;
  };
  using Answer = std::function<void(const Result<Made>&)>;

  enum class Claim {
    kNew,       // the key is now in flight: make the jobs, then made() or failed()
    kWaiting,   // the same submission is in flight: `answer` gets its outcome
    kAnswered,  // it was made: `answer` has been called with its jobs
  };
  // A submission with `key` by `uid`. `answer` is kept only for kWaiting.
  Claim claim(std::uint32_t uid, const std::string& key, Answer answer);
  // The in-flight submission's jobs are stored: kept, and the repeats that
  // waited for it answered.
  void made(std::uint32_t uid, const std::string& key, Made made);
  // It was not stored: forgotten, and the repeats that waited get `why`.
  void failed(std::uint32_t uid, const std::string& key, const Status& why);
  // A job loaded from the store with its key: an array's tasks make one
  // entry (the lowest id, their count).
  void loaded(std::uint32_t uid, const std::string& key, JobId id);

  // The jobs `key` made, if any (not while in flight).
  std::optional<Made> find(std::uint32_t uid, const std::string& key) const;
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Made made;  // count 0 while in flight
    std::vector<Answer> waiting;
  };
  std::map<std::pair<std::uint32_t, std::string>, Entry> entries_;
};

}  // namespace hpcq::job
