// The wall clock, for the processes that live in real time (hpcqd,
// hpcq-agent). lib/sched and lib/resource never call it: their time comes in
// the snapshot, so that the simulator can drive them on a virtual clock.
#pragma once

#include <chrono>

#include "lib/core/ids.h"

namespace hpcq {

inline TimeUs wall_clock_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace hpcq
