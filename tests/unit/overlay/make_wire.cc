// Records the sample overlay messages (wire_samples.h) as this build's
// protocol writes them: make_wire DIR writes DIR/v<protocol>/<sample>.bin.
// tests/data/wire/README.md says when to run it.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "lib/core/protocol_version.h"
#include "tests/unit/overlay/wire_samples.h"

#ifdef HPCQ_WIRE_PROTO_V1
constexpr std::uint32_t kRecordedProtocol = 1;
#else
constexpr std::uint32_t kRecordedProtocol = hpcq::kProtocolVersion;
#endif

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_wire DIR (writes DIR/v%u/*.bin)\n", kRecordedProtocol);
    return 2;
  }
  const std::filesystem::path dir =
      std::filesystem::path(argv[1]) / ("v" + std::to_string(kRecordedProtocol));
  std::filesystem::create_directories(dir);
  for (const auto& sample : hpcq::overlay::wire_samples::all(kRecordedProtocol)) {
    // Deterministic: a map's entries (Launch.env) in key order, so that a
    // recording changes only when the messages do.
    std::string bytes;
    {
      google::protobuf::io::StringOutputStream stream(&bytes);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      sample.envelope.SerializeToCodedStream(&coded);
    }
    std::ofstream out(dir / sample.file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "make_wire: cannot write %s\n", (dir / sample.file).c_str());
      return 1;
    }
    std::printf("%s: %zu bytes\n", (dir / sample.file).c_str(), bytes.size());
  }
  return 0;
}
