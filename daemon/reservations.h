// Advance reservations as hpcqd keeps them (`hpcq reserve`): named windows of
// whole nodes for some users and accounts, stored in the leader's records
// ("reservation"/NAME) and handed to every scheduling cycle as
// sched::AdvanceReservation (lib/sched/snapshot.h says what every action
// does with them).
//
// Pure functions (user names are looked up in the passwd database); errors
// are kInvalidArgument with one line naming the field.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "proto/hpcq.pb.h"

namespace hpcq::daemon {

struct Reservation {
  std::string name;
  std::vector<std::string> nodes;
  TimeUs start = 0;
  TimeUs end = 0;
  std::vector<std::string> users;  // as given: names or numeric uids
  std::vector<std::uint32_t> uids;
  std::vector<std::string> accounts;
};

// Checks a CreateReservation request: a name of [A-Za-z0-9._-] (at most 64),
// at least one node and each known (`known_node`), start < end, end in the
// future, at least one user or account, every user known.
Result<Reservation> reservation_from_request(
    const v1::Reservation& request, const std::function<bool(const std::string&)>& known_node,
    TimeUs now);

v1::Reservation to_proto(const Reservation& reservation);
std::string encode_reservation(const Reservation& reservation);
Result<Reservation> decode_reservation(std::string_view json);

// Whether two reservations share a node during overlapping windows.
bool overlaps(const Reservation& a, const Reservation& b);

}  // namespace hpcq::daemon
