// libFuzzer target: arbitrary bytes as an overlay frame, decoded and handled
// as the leader handles a Hello (the node's topology goes into the pool and
// is allocated from) and as an agent handles a Launch (its share of the job
// becomes a JobLaunch). Neither may crash, hang or allocate without bound on
// any input; a malformed message is refused with a reason.
#include <cstddef>
#include <cstdint>

#include "agent/launch_message.h"
#include "lib/overlay/messages.h"
#include "lib/resource/allocator.h"
#include "lib/resource/node_pool.h"
#include "proto/overlay.pb.h"

namespace {

// An emulated node like the ones agents run in the tests: 2 NUMA domains of
// 4 cores with 2 PUs each.
hpcq::resource::NodeTopology agent_topology() {
  hpcq::resource::NodeTopology topo;
  topo.packages = 1;
  topo.source = "fuzz";
  for (int m = 0; m < 2; ++m) topo.numa.push_back({m, 0, 1ULL << 30});
  for (int c = 0; c < 8; ++c) topo.cores.push_back({c, 0, c / 4, {2 * c, 2 * c + 1}});
  topo.memory_bytes = 2ULL << 30;
  return topo;
}

void leader_takes_hello(const hpcq::overlay::Hello& hello) {
  hpcq::resource::NodePool pool;
  if (!pool.add_node(1, hello.name(), hpcq::overlay::topology_from_message(hello.topology()),
                     /*schedulable=*/true)
           .is_ok()) {
    return;
  }
  hpcq::resource::ResourceRequest request;
  request.ntasks = 2;
  request.cpus_per_task = 2;
  (void)hpcq::resource::find_allocation(request, pool);
}

void agent_takes_launch(const hpcq::overlay::Launch& launch, std::uint32_t self) {
  static const hpcq::resource::NodeTopology topo = agent_topology();
  const hpcq::agent::HostMapping host{&topo, (self & 1) != 0, 4, 2};
  (void)hpcq::agent::job_launch_from_message(launch, self, "n1", host);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hpcq::overlay::Envelope envelope;
  if (!envelope.ParseFromArray(data, static_cast<int>(size))) return 0;
  switch (envelope.body_case()) {
    case hpcq::overlay::Envelope::kHello: leader_takes_hello(envelope.hello()); break;
    case hpcq::overlay::Envelope::kLaunch:
      agent_takes_launch(envelope.launch(), envelope.dst());
      break;
    default: break;
  }
  return 0;
}
