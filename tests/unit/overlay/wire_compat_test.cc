// Recorded wire (tests/data/wire/README.md): the Hello, Launch and JobUpdates
// the previous protocol's build wrote, as bytes, read by this build: every
// field still means what it meant, and the leader takes that Hello. The
// current protocol's recording must equal what this build writes, so that a
// change to these messages is noticed: record it, and raise the protocol if
// an older peer would misread it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/message_differencer.h>

#include "lib/core/protocol_version.h"
#include "tests/unit/overlay/wire_samples.h"

namespace hpcq::overlay {
namespace {

std::filesystem::path recording(std::uint32_t protocol, const std::string& file) {
  return std::filesystem::path(HPCQ_WIRE_DIR) / ("v" + std::to_string(protocol)) / file;
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Envelope decode(std::uint32_t protocol, const std::string& file) {
  Envelope envelope;
  EXPECT_TRUE(envelope.ParseFromString(read_bytes(recording(protocol, file))))
      << recording(protocol, file);
  return envelope;
}

std::string deterministic_bytes(const Envelope& envelope) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  envelope.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

TEST(WireCompatTest, EachRecordingReadsAsTheMessagesItWasWrittenFrom) {
  for (std::uint32_t protocol : {kOldestAcceptedProtocol, kProtocolVersion}) {
    for (const auto& sample : wire_samples::all(protocol)) {
      SCOPED_TRACE("v" + std::to_string(protocol) + "/" + sample.file);
      const Envelope decoded = decode(protocol, sample.file);
      std::string differences;
      google::protobuf::util::MessageDifferencer differencer;
      differencer.ReportDifferencesToString(&differences);
      EXPECT_TRUE(differencer.Compare(sample.envelope, decoded)) << differences;
    }
  }
}

TEST(WireCompatTest, ThePreviousProtocolsHelloIsTakenWithItsJobs) {
  const Envelope envelope = decode(kOldestAcceptedProtocol, "hello.bin");
  ASSERT_TRUE(envelope.has_hello());
  const Hello& hello = envelope.hello();
  EXPECT_EQ(protocol_of(hello.protocol_version()), kOldestAcceptedProtocol);
  EXPECT_TRUE(check_agent_protocol(hello.protocol_version()).accepted());
  EXPECT_EQ(hello.name(), "node3");
  EXPECT_EQ(hello.topology().cores_size(), 4);
  EXPECT_EQ(hello.topology().gpus(0).pci_bus_id(), "0000:41:00.0");
  EXPECT_EQ(hello.core_host_cpus_size(), 4);
  ASSERT_EQ(hello.running_size(), 1);
  EXPECT_EQ(hello.running(0).job_id(), 42u);
  EXPECT_EQ(hello.running(0).input(0).bytes(), 4096u);
  ASSERT_EQ(hello.finished_size(), 1);
  EXPECT_EQ(hello.finished(0).kind(), JobUpdate::FAILED);
  EXPECT_EQ(hello.finished(0).exit_code(), 3);
  EXPECT_EQ(hello.incarnation(), 0x1234abcd5678ef00ull);
  EXPECT_EQ(hello.checkpoints_done(0).image_dir(), "/var/lib/hpcq/checkpoints/40/1");
}

TEST(WireCompatTest, ThePreviousProtocolsLaunchAndUpdatesKeepTheirFields) {
  const Launch launch = decode(kOldestAcceptedProtocol, "launch.bin").launch();
  EXPECT_EQ(launch.job_id(), 42u);
  EXPECT_EQ(launch.env().at("OMP_NUM_THREADS"), "2");
  ASSERT_EQ(launch.allocation_size(), 2);
  EXPECT_EQ(launch.allocation(1).node(), "node4");
  EXPECT_EQ(launch.allocation(1).first_task(), 2);
  EXPECT_EQ(launch.allocation(0).workers(0).cores(0), 0);
  EXPECT_EQ(launch.script(), "#!/bin/sh\n#HPCQ -N 2\nsrun ./solver\n");
  EXPECT_EQ(launch.distribution(), DISTRIBUTION_CYCLIC);
  EXPECT_EQ(launch.cpu_bind(), CPU_BIND_THREADS);
  EXPECT_EQ(launch.warn_target(), "steps");
  EXPECT_EQ(launch.mpi(), "pmi1,pmix");
  const JobUpdate started = decode(kOldestAcceptedProtocol, "job_started.bin").job_update();
  EXPECT_EQ(started.kind(), JobUpdate::STARTED);
  EXPECT_EQ(started.part(), 1u);
  EXPECT_EQ(started.step(), 3u);
  const JobUpdate ended = decode(kOldestAcceptedProtocol, "job_ended.bin").job_update();
  EXPECT_EQ(ended.kind(), JobUpdate::FAILED);
  EXPECT_EQ(ended.exit_code(), 3);
  EXPECT_EQ(ended.max_memory_bytes(), 64ull << 20);
}

TEST(WireCompatTest, TheCurrentProtocolsHelloSaysItsVersion) {
  const Hello hello = decode(kProtocolVersion, "hello.bin").hello();
  EXPECT_EQ(hello.protocol_version(), kProtocolVersion);
  EXPECT_EQ(hello.agent_version(), wire_samples::kRecordedAgentVersion);
  EXPECT_TRUE(check_agent_protocol(hello.protocol_version()).accepted());
}

TEST(WireCompatTest, ThisBuildWritesTheCurrentRecordingByteForByte) {
  for (const auto& sample : wire_samples::all(kProtocolVersion)) {
    SCOPED_TRACE(sample.file);
    EXPECT_EQ(deterministic_bytes(sample.envelope),
              read_bytes(recording(kProtocolVersion, sample.file)))
        << "the messages changed: record them again (tests/data/wire/README.md)";
  }
}

}  // namespace
}  // namespace hpcq::overlay
