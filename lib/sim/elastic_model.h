// How long a job with a node range runs in the simulator, and what a
// resize does to it (hpcq issue 7; the "elastic" action's Shrink/Expand).
//
// Strong scaling by Amdahl's law: on n nodes the job's whole work takes
//   runtime(n) = T1 * (s + (1 - s) / n)
// with T1 its time on one node and s its serial fraction. Paper 001 fits its
// Jacobi2D strong-scaling measurements piecewise-linearly but gives no
// values, so the model is Amdahl's with s = 0.05 unless a job says
// otherwise (SimJob.serial_fraction). A job's trace runtime is its time on
// its minimum node count, so T1 = runtime(min) / (s + (1 - s) / min).
//
// Work is conserved across a resize: the fraction of the work done so far
// is kept, and what is left runs at the new size's speed, so the end is
// recomputed as now + left * runtime(new). A resize costs nothing here (the
// paper measures seconds of checkpoint/restart/load balance and models them
// with a fit it does not publish). Ends are whole seconds (rounded to the
// nearest, never before the resize).
//
// Plain value; not thread-safe; no errors (callers check 0 <= s <= 1 and
// nodes >= 1).
#pragma once

#include <cstdint>

namespace hpcq::sim {

constexpr double kDefaultSerialFraction = 0.05;

// s + (1 - s) / nodes: runtime(nodes) / T1.
double amdahl_factor(double serial_fraction, int nodes);

class ElasticRun {
 public:
  // A run that takes `runtime_at_min_s` on `min_nodes`, started at
  // `start_s` on `nodes`.
  ElasticRun(double runtime_at_min_s, int min_nodes, double serial_fraction, int nodes,
             std::int64_t start_s);

  // The job goes to `nodes` at `now_s` (>= the last start or resize).
  void resize(int nodes, std::int64_t now_s);

  int nodes() const { return nodes_; }
  // Fraction of the work left at the last start or resize.
  double left() const { return left_; }
  // When it ends at its current size.
  std::int64_t end_s() const;
  // Seconds the whole work takes on `nodes` (runtime(nodes)).
  double runtime_s(int nodes) const;

 private:
  double t1_s_;
  double serial_;
  int nodes_;
  std::int64_t since_s_;
  double left_ = 1.0;
};

}  // namespace hpcq::sim
