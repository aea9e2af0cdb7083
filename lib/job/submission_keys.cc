#include "lib/job/submission_keys.h"

#include <algorithm>
#include <cctype>

namespace hpcq::job {

Status check_submission_key(std::string_view key) {
  const bool plain = std::all_of(key.begin(), key.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-';
  });
  if (key.size() > kMaxSubmissionKeyChars || !plain) {
    return invalid_argument("submission_key: want at most " +
                            std::to_string(kMaxSubmissionKeyChars) +
                            " characters of 0-9, A-Z, a-z, '_' and '-'");
  }
  return Status::ok();
}

SubmissionKeys::Claim SubmissionKeys::claim(std::uint32_t uid, const std::string& key,
                                            Answer answer) {
  auto [it, inserted] = entries_.try_emplace({uid, key});
  if (inserted) return Claim::kNew;
  Entry& entry = it->second;
  if (entry.made.count == 0) {
    entry.waiting.push_back(std::move(answer));
    return Claim::kWaiting;
  }
  answer(entry.made);
  return Claim::kAnswered;
}

void SubmissionKeys::made(std::uint32_t uid, const std::string& key, Made made) {
  Entry& entry = entries_[{uid, key}];
  entry.made = made;
  std::vector<Answer> waiting = std::move(entry.waiting);
  entry.waiting.clear();
  for (Answer& answer : waiting) answer(made);
}

void SubmissionKeys::failed(std::uint32_t uid, const std::string& key, const Status& why) {
  auto it = entries_.find({uid, key});
  if (it == entries_.end()) return;
  std::vector<Answer> waiting = std::move(it->second.waiting);
  entries_.erase(it);
  for (Answer& answer : waiting) answer(why);
}

void SubmissionKeys::loaded(std::uint32_t uid, const std::string& key, JobId id) {
  Made& made = entries_[{uid, key}].made;
  made.first = made.count == 0 ? id : std::min(made.first, id);
  ++made.count;
}

std::optional<SubmissionKeys::Made> SubmissionKeys::find(std::uint32_t uid,
                                                         const std::string& key) const {
  auto it = entries_.find({uid, key});
  if (it == entries_.end() || it->second.made.count == 0) return std::nullopt;
  return it->second.made;
}

}  // namespace hpcq::job
