// The credit frame the executor sends a job shell (output_credit.h): its
// round trip, and that no input frame is taken for one.
#include "agent/executor/output_credit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "shell/contract.h"

namespace hpcq::agent {
namespace {

TEST(OutputCredit, AFrameRoundTrips) {
  const CreditFrame sent{70000, true, (std::uint64_t{1} << 40) + 5};
  const auto got = decode_credit_frame(encode_credit_frame(sent));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->rank, 70000);
  EXPECT_TRUE(got->is_stderr);
  EXPECT_EQ(got->bytes, sent.bytes);
}

TEST(OutputCredit, InputFramesAreNotCreditAndCreditIsNoInput) {
  TaskInput input;
  input.data = std::string(kCreditFrameSize - 9, 'x');  // as long as a credit frame
  EXPECT_FALSE(decode_credit_frame(encode_input_frame(input)).has_value());
  input.eof = true;
  EXPECT_FALSE(decode_credit_frame(encode_input_frame(input)).has_value());
  EXPECT_FALSE(decode_credit_frame(encode_input_frame(FenceFrame{1, true, "abcde"})).has_value());
  EXPECT_FALSE(decode_input_frame(encode_credit_frame({0, false, 1})).is_ok());
  std::string cut = encode_credit_frame({0, false, 1});
  cut.pop_back();
  EXPECT_FALSE(decode_credit_frame(cut).has_value());
}

}  // namespace
}  // namespace hpcq::agent
