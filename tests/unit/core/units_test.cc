#include "lib/core/units.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace hpcq {
namespace {

struct DurationCase {
  const char* text;
  std::int64_t seconds;
};

class DurationGood : public ::testing::TestWithParam<DurationCase> {};

TEST_P(DurationGood, Parses) {
  auto r = parse_duration_s(GetParam().text);
  ASSERT_TRUE(r.is_ok()) << GetParam().text << ": " << r.status().message();
  EXPECT_EQ(*r, GetParam().seconds) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Units, DurationGood,
    ::testing::Values(DurationCase{"5", 300},    // MM
                      DurationCase{"90", 5400},  // minutes are not range-checked, as in Slurm
                      DurationCase{"0:02", 2},   // MM:SS
                      DurationCase{"5:00", 300}, DurationCase{"0:90", 90},
                      DurationCase{"1:02:03", 3723},  // HH:MM:SS
                      DurationCase{"1-0", 86400},     // D-HH
                      DurationCase{"2-03", 2 * 86400 + 3 * 3600},
                      DurationCase{"1-02:03", 86400 + 7200 + 180},         // D-HH:MM
                      DurationCase{"1-02:03:04", 86400 + 7200 + 180 + 4},  // D-HH:MM:SS
                      DurationCase{"0-00:00:01", 1}, DurationCase{"30s", 30},
                      DurationCase{"10m", 600}, DurationCase{"2h", 7200}, DurationCase{"1d", 86400},
                      DurationCase{"1.5h", 5400}, DurationCase{"0.5m", 30}, DurationCase{".5m", 30},
                      DurationCase{"0.1s", 1},  // rounds up, never shorter than asked
                      DurationCase{"1.0001s", 2}, DurationCase{"2H", 7200},
                      DurationCase{"UNLIMITED", 0}, DurationCase{"unlimited", 0},
                      DurationCase{"infinite", 0}, DurationCase{"INFINITE", 0},
                      DurationCase{"106751991167300d", 106751991167300LL * 86400}));

class DurationBad : public ::testing::TestWithParam<const char*> {};

TEST_P(DurationBad, IsInvalidArgumentQuotingTheText) {
  const std::string text = GetParam();
  auto r = parse_duration_s(text);
  ASSERT_FALSE(r.is_ok()) << text << " parsed as " << *r;
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'" + text + "'"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Units, DurationBad,
                         ::testing::Values("", "0", "00", "0:00", "0-0", "0s", "0.0h", "-5", "-1",
                                           "+5", " 5", "5 ", "5x", "1:2:3:4", "1-2:3:4:5", "1-",
                                           "-1-2", ":5", "5:", "1::2", "1.5", "1.h", "h", "s",
                                           "1.5.5h", "1,5h", "1e3s", "abc", "unlimitedx", "1-2-3",
                                           "1.0000000001h", "99999999999999999999",
                                           "9223372036854775807", "106751991167301d",
                                           "153722867280912931m:00", "9223372036854775807-0"));

TEST(Units, DurationControlCharactersAreEscapedInTheMessage) {
  auto r = parse_duration_s(std::string("1\n2\0", 4));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "bad duration '1\\x0a2\\x00'");
}

struct FormatDurationCase {
  std::int64_t seconds;
  const char* text;
};

class FormatDuration : public ::testing::TestWithParam<FormatDurationCase> {};

TEST_P(FormatDuration, Formats) {
  EXPECT_EQ(format_duration(GetParam().seconds), GetParam().text);
  if (GetParam().seconds > 0) {
    auto back = parse_duration_s(GetParam().text);
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    EXPECT_EQ(*back, GetParam().seconds);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Units, FormatDuration,
    ::testing::Values(FormatDurationCase{300, "00:05:00"}, FormatDurationCase{1, "00:00:01"},
                      FormatDurationCase{3723, "01:02:03"}, FormatDurationCase{86399, "23:59:59"},
                      FormatDurationCase{86400, "1-00:00:00"},
                      FormatDurationCase{93784, "1-02:03:04"},
                      FormatDurationCase{400 * 86400, "400-00:00:00"},
                      FormatDurationCase{0, "UNLIMITED"}, FormatDurationCase{-1, "INVALID"}));

TEST(Units, FormatDurationOfUnlimitedReadsBack) {
  auto r = parse_duration_s(format_duration(0));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, 0);
}

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = kKiB * 1024;
constexpr std::uint64_t kGiB = kMiB * 1024;
constexpr std::uint64_t kTiB = kGiB * 1024;

struct MemoryCase {
  const char* text;
  std::uint64_t bytes;
};

class MemoryGood : public ::testing::TestWithParam<MemoryCase> {};

TEST_P(MemoryGood, Parses) {
  auto r = parse_memory_bytes(GetParam().text);
  ASSERT_TRUE(r.is_ok()) << GetParam().text << ": " << r.status().message();
  EXPECT_EQ(*r, GetParam().bytes) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Units, MemoryGood,
    ::testing::Values(MemoryCase{"512", 512 * kMiB},  // a plain number is MiB, as in Slurm
                      MemoryCase{"0", 0},             // all of the node
                      MemoryCase{"0G", 0}, MemoryCase{"1K", kKiB}, MemoryCase{"1536k", 1536 * kKiB},
                      MemoryCase{"512M", 512 * kMiB}, MemoryCase{"4G", 4 * kGiB},
                      MemoryCase{"4g", 4 * kGiB}, MemoryCase{"4GB", 4 * kGiB},
                      MemoryCase{"4gb", 4 * kGiB}, MemoryCase{"4GiB", 4 * kGiB},
                      MemoryCase{"4gib", 4 * kGiB}, MemoryCase{"2T", 2 * kTiB},
                      MemoryCase{"1P", 1024 * kTiB}, MemoryCase{"1000B", 1000},
                      MemoryCase{"16383P", 16383 * 1024 * kTiB},
                      MemoryCase{"18446744073709551615B", UINT64_MAX}));

class MemoryBad : public ::testing::TestWithParam<const char*> {};

TEST_P(MemoryBad, IsInvalidArgumentQuotingTheText) {
  const std::string text = GetParam();
  auto r = parse_memory_bytes(text);
  ASSERT_FALSE(r.is_ok()) << text << " parsed as " << *r;
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'" + text + "'"), std::string::npos) << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(Units, MemoryBad,
                         ::testing::Values("", "lots", "-1", "-1G", "+1G", "1.5G", "G", "4 G",
                                           " 4G", "4G ", "4X", "4GG", "4GiBx", "4iB", "4Gi", "4KB5",
                                           "0x10", "16384P", "17179869184T",
                                           "18446744073709551616B", "99999999999999999999",
                                           "18446744073709551615"));

TEST(Units, MemoryMessages) {
  EXPECT_EQ(parse_memory_bytes("lots").status().message(), "bad size 'lots'");
  EXPECT_EQ(parse_memory_bytes("16384P").status().message(), "size '16384P' is too large");
}

struct FormatMemoryCase {
  std::uint64_t bytes;
  const char* text;
};

class FormatMemory : public ::testing::TestWithParam<FormatMemoryCase> {};

TEST_P(FormatMemory, FormatsAndReadsBack) {
  EXPECT_EQ(format_memory(GetParam().bytes), GetParam().text);
  auto back = parse_memory_bytes(GetParam().text);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(*back, GetParam().bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Units, FormatMemory,
    ::testing::Values(FormatMemoryCase{4 * kGiB, "4G"}, FormatMemoryCase{512 * kMiB, "512M"},
                      FormatMemoryCase{1536 * kKiB, "1536K"},
                      FormatMemoryCase{1536 * kMiB, "1536M"}, FormatMemoryCase{3 * kTiB, "3T"},
                      FormatMemoryCase{2048 * kTiB, "2P"}, FormatMemoryCase{1000, "1000B"},
                      FormatMemoryCase{0, "0"},
                      FormatMemoryCase{UINT64_MAX, "18446744073709551615B"}));

TEST(Units, QuoteEscapesAndTruncates) {
  EXPECT_EQ(quote("abc"), "'abc'");
  EXPECT_EQ(quote(""), "''");
  EXPECT_EQ(quote("a\tb\x7f\xc3"), "'a\\x09b\\x7f\\xc3'");
  const std::string long_text(100, 'x');
  EXPECT_EQ(quote(long_text), "'" + std::string(64, 'x') + "...'");
}

// --begin and --start: Slurm's now+COUNT[UNIT] (seconds by default), -t's
// durations, and no overflow or far future.
std::int64_t offset_s(const std::string& text) {
  auto when = parse_when(text, "--begin");
  EXPECT_TRUE(when.is_ok()) << text << ": " << when.status().message();
  if (!when.is_ok()) return -1;
  EXPECT_TRUE(when->relative) << text;
  return when->us / 1000000;
}

TEST(Units, WhenOffsetsAreSlurmsCountsWithUnits) {
  EXPECT_EQ(offset_s("now"), 0);
  EXPECT_EQ(offset_s("now+90"), 90);
  EXPECT_EQ(offset_s("+90"), 90);
  EXPECT_EQ(offset_s("now+90seconds"), 90);
  EXPECT_EQ(offset_s("now+1second"), 1);
  EXPECT_EQ(offset_s("now+5minutes"), 300);
  EXPECT_EQ(offset_s("now+1minute"), 60);
  EXPECT_EQ(offset_s("now+2hours"), 7200);
  EXPECT_EQ(offset_s("now+2HOUR"), 7200);
  EXPECT_EQ(offset_s("now+3days"), 3 * 86400);
  EXPECT_EQ(offset_s("now+1day"), 86400);
  EXPECT_EQ(offset_s("now+2weeks"), 14 * 86400);
  EXPECT_EQ(offset_s("now+52week"), 52 * 7 * 86400);
  EXPECT_EQ(offset_s("now+30m"), 1800);  // -t's forms go on working
  EXPECT_EQ(offset_s("now+1:00:00"), 3600);
  EXPECT_EQ(offset_s("now+1-0"), 86400);
  EXPECT_EQ(offset_s("now+365days"), kMaxWhenAheadS);
}

TEST(Units, WhenRefusesJunkOverflowAndTheFarFuture) {
  for (const char* bad : {"now+", "now+0", "now+0hours", "now+x", "now+5 minutes", "now+5min",
                          "now+-5", "now++5", "now+5fortnights", "now+hours", "soon"}) {
    auto when = parse_when(bad, "--begin");
    ASSERT_FALSE(when.is_ok()) << bad;
    EXPECT_EQ(when.status().code(), Code::kInvalidArgument) << bad;
  }
  for (const char* far :
       {"now+99999999999", "now+99999999999999999999999999", "now+366days", "now+53weeks",
        "now+9999999999999999999weeks", "now+31536001", "now+1234567890"}) {
    auto when = parse_when(far, "--begin");
    ASSERT_FALSE(when.is_ok()) << far;
    EXPECT_NE(when.status().message().find("more than 365 days ahead"), std::string::npos)
        << far << ": " << when.status().message();
  }
  EXPECT_EQ(parse_when("now+99999999999", "--begin").status().message(),
            "--begin: 'now+99999999999' is more than 365 days ahead");
  EXPECT_EQ(parse_when("now+5min", "--begin").status().message(),
            "--begin: bad offset '5min' (want now+COUNT[seconds|minutes|hours|days|weeks], "
            "e.g. now+90, now+2hours, or now+DURATION as -t takes it, e.g. now+1:00:00)");
}

TEST(Units, ResolveWhenBoundsAbsoluteTimesToAYearAhead) {
  const std::int64_t now = std::int64_t{1'800'000'000} * 1000000;  // 2027
  auto soon = parse_when("2027-06-01", "--begin");
  ASSERT_TRUE(soon.is_ok());
  EXPECT_TRUE(resolve_when(*soon, now, "--begin").is_ok());
  auto past = parse_when("2001-01-01", "--begin");  // already passed: starts at once
  ASSERT_TRUE(past.is_ok());
  EXPECT_TRUE(resolve_when(*past, now, "--begin").is_ok());
  auto far = parse_when("2206-01-01", "--begin");
  ASSERT_TRUE(far.is_ok());
  auto resolved = resolve_when(*far, now, "--begin");
  ASSERT_FALSE(resolved.is_ok());
  EXPECT_EQ(resolved.status().message(),
            "--begin: 2206-01-01T00:00:00 is more than 365 days ahead");
  auto relative = parse_when("now+2hours", "--begin");
  ASSERT_TRUE(relative.is_ok());
  EXPECT_EQ(*resolve_when(*relative, now, "--begin"), now + 7200 * 1000000LL);
}

}  // namespace
}  // namespace hpcq
