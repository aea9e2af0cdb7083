// Sample overlay messages for the recorded-wire compatibility test
// (wire_compat_test.cc) and its recorder (make_wire.cc): a Hello, a Launch
// and two JobUpdates (a start, an end), each in an Envelope, with the fields
// a real cluster fills. tests/data/wire/README.md says how they are recorded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/overlay.pb.h"

namespace hpcq::overlay::wire_samples {

// The version string a recorded Hello of protocol 2 or later carries.
inline constexpr const char* kRecordedAgentVersion = "0.1.0+88f0ac6";

// Each sample as protocol `protocol` writes it: the fields a later protocol
// added are left unset in an earlier one's.
Envelope hello(std::uint32_t protocol);
Envelope launch(std::uint32_t protocol);
Envelope job_started(std::uint32_t protocol);
Envelope job_ended(std::uint32_t protocol);

struct Sample {
  std::string file;  // under tests/data/wire/v<protocol>/
  Envelope envelope;
};
std::vector<Sample> all(std::uint32_t protocol);

}  // namespace hpcq::overlay::wire_samples
