#include "lib/sim/elastic_model.h"

#include <algorithm>
#include <cmath>

namespace hpcq::sim {

double amdahl_factor(double serial_fraction, int nodes) {
  return serial_fraction + (1.0 - serial_fraction) / static_cast<double>(nodes);
}

ElasticRun::ElasticRun(double runtime_at_min_s, int min_nodes, double serial_fraction, int nodes,
                       std::int64_t start_s)
    : t1_s_(runtime_at_min_s / amdahl_factor(serial_fraction, min_nodes)),
      serial_(serial_fraction),
      nodes_(nodes),
      since_s_(start_s) {}

double ElasticRun::runtime_s(int nodes) const { return t1_s_ * amdahl_factor(serial_, nodes); }

void ElasticRun::resize(int nodes, std::int64_t now_s) {
  const double full = runtime_s(nodes_);
  if (full > 0) {
    left_ = std::max(0.0, left_ - static_cast<double>(now_s - since_s_) / full);
  }
  nodes_ = nodes;
  since_s_ = now_s;
}

std::int64_t ElasticRun::end_s() const {
  return since_s_ + std::llround(left_ * runtime_s(nodes_));
}

}  // namespace hpcq::sim
