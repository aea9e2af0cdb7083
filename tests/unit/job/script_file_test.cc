#include "lib/job/script_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "tests/unit/store/temp_dir.h"

namespace hpcq::job {
namespace {

using store::testing::TempDir;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(ScriptFile, ReadsAScriptWhole) {
  TempDir dir;
  write(dir.file("job.sh"), "#!/bin/sh\n#HPCQ -N 2\nhostname\n");
  auto text = read_script_file(dir.file("job.sh"));
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_EQ(*text, "#!/bin/sh\n#HPCQ -N 2\nhostname\n");
}

TEST(ScriptFile, ACommandIsReadOnlyAsFarAsItsFirstBytes) {
  TempDir dir;
  write(dir.file("big.bin"), std::string(64, '\x7f') + std::string(1 << 20, 'x'));
  auto text = read_script_file(dir.file("big.bin"), 1024);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_EQ(text->size(), 2u);
  EXPECT_FALSE(text->starts_with("#!"));
}

TEST(ScriptFile, AScriptPastTheBoundIsRefused) {
  TempDir dir;
  const std::string exact = "#!/bin/sh\n" + std::string(1024 - 10, '#');
  write(dir.file("exact.sh"), exact);
  auto fits = read_script_file(dir.file("exact.sh"), 1024);
  ASSERT_TRUE(fits.is_ok()) << fits.status().message();
  EXPECT_EQ(fits->size(), 1024u);
  write(dir.file("over.sh"), exact + "\n");
  auto over = read_script_file(dir.file("over.sh"), 1024);
  ASSERT_FALSE(over.is_ok());
  EXPECT_EQ(over.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(over.status().message().find("is larger than 1024 bytes"), std::string::npos)
      << over.status().message();
  EXPECT_EQ(kMaxScriptBytes, 4u << 20);  // Slurm's default max_script_size
}

TEST(ScriptFile, ADeviceOrAFifoIsRefusedWithoutReadingIt) {
  const auto start = std::chrono::steady_clock::now();
  auto zero = read_script_file("/dev/zero");
  ASSERT_FALSE(zero.is_ok());
  EXPECT_EQ(zero.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(zero.status().message(), "'/dev/zero' is not a regular file (a script must be one)");
  TempDir dir;
  ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0600), 0);
  auto fifo = read_script_file(dir.file("fifo"));  // would block if it were opened and read
  ASSERT_FALSE(fifo.is_ok());
  EXPECT_EQ(fifo.status().code(), Code::kFailedPrecondition);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(ScriptFile, MissingFilesAndDirectoriesAreCommandWords) {
  TempDir dir;
  EXPECT_EQ(read_script_file(dir.file("hostname")).status().code(), Code::kNotFound);
  EXPECT_EQ(read_script_file(dir.path()).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace hpcq::job
