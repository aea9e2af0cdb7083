#include "lib/overlay/messages.h"

namespace hpcq::overlay {

std::string body_name(const Envelope& envelope) {
  const auto* field = envelope.GetDescriptor()->FindFieldByNumber(envelope.body_case());
  return field != nullptr ? field->name() : "empty";
}

void topology_to_message(const resource::NodeTopology& topology, Topology* message) {
  message->set_packages(topology.packages);
  message->set_memory_bytes(topology.memory_bytes);
  message->set_source(topology.source);
  for (const resource::NumaDomain& n : topology.numa) {
    Numa* m = message->add_numa();
    m->set_id(n.id);
    m->set_package(n.package);
    m->set_memory_bytes(n.memory_bytes);
  }
  for (const resource::Core& c : topology.cores) {
    Core* core = message->add_cores();
    core->set_id(c.id);
    core->set_package(c.package);
    core->set_numa(c.numa);
    for (int pu : c.pus) core->add_pus(pu);
  }
  for (const resource::Gpu& g : topology.gpus) {
    Gpu* gpu = message->add_gpus();
    gpu->set_id(g.id);
    gpu->set_numa(g.numa);
    gpu->set_name(g.name);
    gpu->set_pci_bus_id(g.pci_bus_id);
  }
}

resource::NodeTopology topology_from_message(const Topology& message) {
  resource::NodeTopology topology;
  topology.packages = message.packages();
  topology.memory_bytes = message.memory_bytes();
  topology.source = message.source();
  for (const Numa& n : message.numa()) {
    topology.numa.push_back({n.id(), n.package(), n.memory_bytes()});
  }
  for (const Core& c : message.cores()) {
    topology.cores.push_back({c.id(), c.package(), c.numa(), {c.pus().begin(), c.pus().end()}});
  }
  for (const Gpu& g : message.gpus()) {
    topology.gpus.push_back({g.id(), g.numa(), g.name(), g.pci_bus_id()});
  }
  return topology;
}

Distribution to_message(resource::Distribution distribution) {
  return distribution == resource::Distribution::kCyclic ? DISTRIBUTION_CYCLIC : DISTRIBUTION_BLOCK;
}

Result<resource::Distribution> from_message(Distribution distribution) {
  switch (distribution) {
    case DISTRIBUTION_BLOCK: return resource::Distribution::kBlock;
    case DISTRIBUTION_CYCLIC: return resource::Distribution::kCyclic;
    default: break;
  }
  return invalid_argument("unknown distribution " + std::to_string(distribution));
}

CpuBind to_message(resource::CpuBind bind) {
  switch (bind) {
    case resource::CpuBind::kCores: return CPU_BIND_CORES;
    case resource::CpuBind::kThreads: return CPU_BIND_THREADS;
    case resource::CpuBind::kNone: return CPU_BIND_NONE;
  }
  return CPU_BIND_CORES;
}

Result<resource::CpuBind> from_message(CpuBind bind) {
  switch (bind) {
    case CPU_BIND_CORES: return resource::CpuBind::kCores;
    case CPU_BIND_THREADS: return resource::CpuBind::kThreads;
    case CPU_BIND_NONE: return resource::CpuBind::kNone;
    default: break;
  }
  return invalid_argument("unknown cpu-bind " + std::to_string(bind));
}

}  // namespace hpcq::overlay
