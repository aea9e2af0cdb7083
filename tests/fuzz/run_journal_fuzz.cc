// libFuzzer target: arbitrary bytes as one of the agent's run journals
// (<state_dir>/ends/journal and <state_dir>/parts/journal,
// agent/run_journal.h) or an output spool file (<state_dir>/output/1.0,
// agent/output_spool.h) as a crash, a full disk or damage may leave it; the
// first byte picks which. Opening it may not crash or allocate by what a record
// announces; it keeps the whole records before the first bad one, at most
// one end per job, and cuts the rest off, so that a second open finds the
// same ends in a file of whole records.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <spdlog/spdlog.h>

#include "agent/output_spool.h"
#include "agent/run_journal.h"

namespace {

std::string scratch() {
  static const std::string dir = [] {
    // Each torn input is a warning: not tens of thousands of lines in the log.
    spdlog::set_level(spdlog::level::off);
    char tmpl[] = "/tmp/hpcq-run-journal-fuzz-XXXXXX";
    const char* made = mkdtemp(tmpl);
    if (made == nullptr) __builtin_trap();
    static const std::string root = made;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(root, ec);
    });
    return root + "/journal";
  }();
  return dir;
}

// A fresh scratch directory holding `data` as its file `name`; returns it.
std::string scratch_with(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const std::string dir = scratch();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return dir;
}

template <typename Journal>
void open_twice(const std::uint8_t* data, std::size_t size) {
  const std::string dir = scratch_with("journal", data, size);
  std::vector<std::string> first;
  {
    auto journal = Journal::open(dir, "fuzzed journal", /*sync=*/false);
    if (!journal.is_ok()) __builtin_trap();  // damage is cut off, never refused
    std::set<std::pair<std::uint64_t, std::uint32_t>> keys;
    for (const auto& entry : (*journal)->entries()) {
      if (!keys.insert({entry.job_id(), entry.step()}).second) __builtin_trap();
      first.push_back(entry.SerializeAsString());
    }
  }
  if (std::filesystem::file_size(dir + "/journal") > size) __builtin_trap();
  auto again = Journal::open(dir, "fuzzed journal", /*sync=*/false);
  if (!again.is_ok()) __builtin_trap();
  const auto second = (*again)->entries();
  if (second.size() != first.size()) __builtin_trap();
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (second[i].SerializeAsString() != first[i]) __builtin_trap();
  }
}

// A spool file: what take() keeps is whole records, and taking it again
// (from the file take() rewrote) finds the same.
void take_twice(const std::uint8_t* data, std::size_t size) {
  const std::string dir = scratch_with("1.0", data, size);
  std::vector<std::string> first;
  {
    hpcq::agent::OutputSpool spool(dir);
    for (const auto& chunk : spool.take({{1, 0}})) first.push_back(chunk.data);
  }
  if (std::filesystem::file_size(dir + "/1.0") > size) __builtin_trap();
  hpcq::agent::OutputSpool again(dir);
  const auto second = again.take({{1, 0}});
  if (second.size() != first.size()) __builtin_trap();
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (second[i].data != first[i]) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0: open_twice<hpcq::agent::EndJournal>(data + 1, size - 1); break;
    case 1: open_twice<hpcq::agent::PartJournal>(data + 1, size - 1); break;
    default: take_twice(data + 1, size - 1); break;
  }
  return 0;
}
