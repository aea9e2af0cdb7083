#include "tests/unit/overlay/wire_samples.h"

namespace hpcq::overlay::wire_samples {

namespace {

JobUpdate ended_update() {
  JobUpdate update;
  update.set_job_id(41);
  update.set_kind(JobUpdate::FAILED);
  update.set_exit_code(3);
  update.set_reason("exit code 3");
  update.set_time_us(1700000000123456);
  update.set_attempt(1);
  update.set_part(0);
  update.set_step(0);
  update.set_cpu_time_us(2500000);
  update.set_max_memory_bytes(64ull << 20);
  return update;
}

void fill_topology(Topology* topology) {
  topology->set_packages(2);
  for (int n = 0; n < 2; ++n) {
    Numa* numa = topology->add_numa();
    numa->set_id(n);
    numa->set_package(n);
    numa->set_memory_bytes(8ull << 30);
  }
  for (int c = 0; c < 4; ++c) {
    Core* core = topology->add_cores();
    core->set_id(c);
    core->set_package(c / 2);
    core->set_numa(c / 2);
    core->add_pus(2 * c);
    core->add_pus(2 * c + 1);
  }
  topology->set_memory_bytes(16ull << 30);
  topology->set_source("synthetic:pack:2 numa:1 core:2 pu:2");
  Gpu* gpu = topology->add_gpus();
  gpu->set_id(0);
  gpu->set_numa(1);
  gpu->set_name("NVIDIA H100");
  gpu->set_pci_bus_id("0000:41:00.0");
}

}  // namespace

Envelope hello(std::uint32_t protocol) {
  Envelope envelope;
  envelope.set_src(3);
  envelope.set_dst(0);
  Hello* hello = envelope.mutable_hello();
  hello->set_name("node3");
  fill_topology(hello->mutable_topology());
  hello->set_host_cpus(8);
  hello->set_host_numa(2);
  for (int cpu : {3, 5, 7, 1}) hello->add_core_host_cpus(cpu);
  RunningJob* running = hello->add_running();
  running->set_job_id(42);
  running->set_attempt(2);
  running->set_signals(1);
  InputReceived* input = running->add_input();
  input->set_step(0);
  input->set_bytes(4096);
  input->set_eof(true);
  *hello->add_finished() = ended_update();
  hello->set_incarnation(0x1234abcd5678ef00ull);
  hello->set_checkpoint_capable(true);
  hello->set_checkpoint_other_users(false);
  hello->set_checkpoint_other_users_reason("only root's jobs: the trial dump failed");
  CheckpointDone* done = hello->add_checkpoints_done();
  done->set_job_id(40);
  done->set_attempt(0);
  done->set_ok(true);
  done->set_stopped(true);
  done->set_image_bytes(1 << 20);
  done->set_dump_seconds(0.25);
  done->set_image_dir("/var/lib/hpcq/checkpoints/40/1");
#ifndef HPCQ_WIRE_PROTO_V1  // defined only to record protocol 1 (tests/data/wire/README.md)
  if (protocol >= 2) {
    hello->set_protocol_version(protocol);
    hello->set_agent_version(kRecordedAgentVersion);
  }
#else
  (void)protocol;
#endif
  return envelope;
}

Envelope launch(std::uint32_t /*protocol*/) {
  Envelope envelope;
  envelope.set_src(0);
  envelope.set_dst(3);
  Launch* launch = envelope.mutable_launch();
  launch->set_job_id(42);
  launch->set_uid(1000);
  launch->set_gid(1000);
  launch->set_user("alice");
  launch->add_argv("./solver");
  launch->add_argv("--steps=10");
  launch->set_script("#!/bin/sh\n#HPCQ -N 2\nsrun ./solver\n");
  (*launch->mutable_env())["PATH"] = "/usr/bin:/bin";
  (*launch->mutable_env())["OMP_NUM_THREADS"] = "2";
  launch->set_cwd("/home/alice/run");
  launch->set_stdout_path("/home/alice/run/out-%j.txt");
  launch->set_stderr_path("/home/alice/run/err-%j.txt");
  for (std::uint32_t rank : {3u, 4u}) {
    NodeAlloc* part = launch->add_allocation();
    part->set_rank(rank);
    part->set_node("node" + std::to_string(rank));
    part->add_cores(0);
    part->add_cores(1);
    part->add_numa(0);
    part->set_memory_bytes(2ull << 30);
    part->set_ntasks(2);
    part->set_first_task(rank == 3 ? 0 : 2);
    part->add_gpus(0);
    Worker* worker = part->add_workers();
    worker->set_id(0);
    worker->set_group(0);
    worker->add_ranks(rank == 3 ? 0 : 2);
    worker->add_cores(0);
  }
  launch->set_cpus_per_task(1);
  launch->set_time_limit_s(3600);
  launch->set_ntasks(4);
  launch->set_attempt(2);
  launch->set_gpus_per_task(0);
  launch->set_distribution(DISTRIBUTION_CYCLIC);
  launch->set_cpu_bind(CPU_BIND_THREADS);
  launch->set_restore_from("/var/lib/hpcq/checkpoints/42/1");
  launch->set_image("/srv/images/solver");
  launch->set_elastic(true);
  launch->set_part(1);
  launch->set_batch(true);
  launch->set_forward_output(false);
  launch->set_step(0);
  launch->set_warn_signal(10);
  launch->set_warn_seconds(60);
  launch->set_warn_target("steps");
  launch->set_pty(false);
  launch->set_mpi("pmi1,pmix");
  return envelope;
}

Envelope job_started(std::uint32_t /*protocol*/) {
  Envelope envelope;
  envelope.set_src(3);
  envelope.set_dst(0);
  JobUpdate* update = envelope.mutable_job_update();
  update->set_job_id(42);
  update->set_kind(JobUpdate::STARTED);
  update->set_time_us(1700000000000001);
  update->set_attempt(2);
  update->set_part(1);
  update->set_step(3);
  return envelope;
}

Envelope job_ended(std::uint32_t /*protocol*/) {
  Envelope envelope;
  envelope.set_src(3);
  envelope.set_dst(0);
  *envelope.mutable_job_update() = ended_update();
  return envelope;
}

std::vector<Sample> all(std::uint32_t protocol) {
  return {{"hello.bin", hello(protocol)},
          {"launch.bin", launch(protocol)},
          {"job_started.bin", job_started(protocol)},
          {"job_ended.bin", job_ended(protocol)}};
}

}  // namespace hpcq::overlay::wire_samples
