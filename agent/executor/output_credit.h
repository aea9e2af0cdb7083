// Credit for a forwarded task stream, from the executor to the job shell
// (issue 45: back-pressure from hpcq run's reader to the task). The shell
// reads a task's stdout or stderr pipe only while that stream has credit,
// so a task whose output nobody takes blocks on its write, as under srun;
// the leader grants more as its readers take the output (overlay
// OutputCredit, daemon/job_output.h), the agent turns each grant into the
// bytes it adds (OutputLog::credit) and the executor sends those here.
//
// A credit frame travels on the shell's channel (fd kOutputFd) among the
// input frames (shell/contract.h): flags byte kCreditFrame, which no input
// frame has, then the task's rank (u32), 1 for stderr or 0, and the bytes
// added (u64), little-endian. Header-only and pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hpcq::agent {

// What a stream may send before its first grant: enough for a task that
// writes little never to wait on the leader. The leader counts it as
// granted (JobOutput::kInitialCredit).
constexpr std::uint64_t kInitialOutputCredit = 64 << 10;

constexpr char kCreditFrame = 64;
constexpr std::size_t kCreditFrameSize = 14;

struct CreditFrame {
  int rank = 0;
  bool is_stderr = false;
  std::uint64_t bytes = 0;  // added to what the stream may send
};

inline std::string encode_credit_frame(const CreditFrame& credit) {
  std::string frame(1, kCreditFrame);
  const auto rank = static_cast<std::uint32_t>(credit.rank);
  for (int i = 0; i < 4; ++i) frame += static_cast<char>((rank >> (8 * i)) & 0xff);
  frame += credit.is_stderr ? '\1' : '\0';
  for (int i = 0; i < 8; ++i) frame += static_cast<char>((credit.bytes >> (8 * i)) & 0xff);
  return frame;
}

// nullopt: not a credit frame (an input, fence or modex frame).
inline std::optional<CreditFrame> decode_credit_frame(std::string_view frame) {
  if (frame.size() != kCreditFrameSize || frame[0] != kCreditFrame) return std::nullopt;
  auto byte = [&](std::size_t i) {
    return static_cast<std::uint64_t>(static_cast<unsigned char>(frame[i]));
  };
  CreditFrame credit;
  std::uint32_t rank = 0;
  for (int i = 0; i < 4; ++i) rank |= static_cast<std::uint32_t>(byte(1 + i) << (8 * i));
  credit.rank = static_cast<int>(rank);
  credit.is_stderr = frame[5] != 0;
  for (int i = 0; i < 8; ++i) credit.bytes |= byte(6 + i) << (8 * i);
  return credit;
}

}  // namespace hpcq::agent
