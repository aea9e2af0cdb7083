#include "shell/pmix_world.h"

#include <errno.h>
#include <hwloc.h>
#include <pmix.h>
#include <pmix_server.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

// A sanitized build: libpmix 4.2 does not free a few hundred bytes of what
// PMIx_server_init and its info values allocate (LeakSanitizer's report,
// which would fail every PMIx shell's exit); they are not ours to fix.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
extern "C" const char* __lsan_default_suppressions() { return "leak:libpmix.so\n"; }
#endif
#endif

namespace hpcq::agent {
namespace {

// What OpenPMIx's thread asked of the host, for the shell's loop.
struct Upcall {
  // kModexRequest: a local task wants rank's data, which another node has;
  // kModexData: the data of one of this node's ranks another node asked for.
  enum class Kind { kConnected, kFinalized, kAbort, kFence, kModexRequest, kModexData, kSpawn };
  explicit Upcall(Kind k, pmix_rank_t r = 0, int c = 0) : kind(k), rank(r), code(c) {}
  Kind kind;
  pmix_rank_t rank;
  int code;               // kAbort: the status the client gave; kModexData: PMIx's status
  std::string data;       // kFence: the node's contribution; kModexData: the rank's data
  std::uint64_t tag = 0;  // kModexData: the asking node's request, as the executor tagged it
  pmix_modex_cbfunc_t done = nullptr;
  void* done_data = nullptr;
};

// The upcalls' way from PMIx's thread to the loop: a queue and an eventfd
// that becomes readable while the queue holds any.
class UpcallQueue {
 public:
  UpcallQueue() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~UpcallQueue() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  void push(Upcall u) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(u));
    }
    const std::uint64_t one = 1;
    ssize_t ignored = write(fd_, &one, sizeof one);
    (void)ignored;
  }
  std::deque<Upcall> take() {
    std::uint64_t count;
    ssize_t ignored = read(fd_, &count, sizeof count);
    (void)ignored;
    std::lock_guard lock(mu_);
    return std::exchange(queue_, {});
  }

 private:
  int fd_;
  std::mutex mu_;
  std::deque<Upcall> queue_;
};

// The process's one server (PMIx allows one per process).
UpcallQueue* g_upcalls = nullptr;

pmix_status_t on_connected(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  g_upcalls->push(Upcall(Upcall::Kind::kConnected, proc->rank));
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_finalized(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  g_upcalls->push(Upcall(Upcall::Kind::kFinalized, proc->rank));
  return PMIX_OPERATION_SUCCEEDED;
}

// The whole world ends, whichever processes the caller named (as srun does).
pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char* message,
                       pmix_proc_t*, size_t, pmix_op_cbfunc_t, void*) {
  Upcall u(Upcall::Kind::kAbort, proc->rank, status);
  if (message != nullptr) u.data = message;
  g_upcalls->push(std::move(u));
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t*, size_t,
                       char* data, size_t ndata, pmix_modex_cbfunc_t done, void* done_data) {
  // The node's part of a fence over the whole namespace; one over part of
  // it would need a different set of nodes to meet.
  if (nprocs != 1 || procs[0].rank != PMIX_RANK_WILDCARD) return PMIX_ERR_NOT_SUPPORTED;
  Upcall u(Upcall::Kind::kFence);
  u.data.assign(data == nullptr ? "" : data, data == nullptr ? 0 : ndata);
  u.done = done;
  u.done_data = done_data;
  g_upcalls->push(std::move(u));
  return PMIX_SUCCESS;
}

// A task asked for a key of a rank on another node that no fence has
// carried (a fence without PMIX_COLLECT_DATA, or none: Open MPI's
// pmix_base_async_modex): that node is asked for the rank's data.
pmix_status_t on_direct_modex(const pmix_proc_t* proc, const pmix_info_t*, size_t,
                              pmix_modex_cbfunc_t done, void* done_data) {
  Upcall u(Upcall::Kind::kModexRequest, proc->rank);
  u.done = done;
  u.done_data = done_data;
  g_upcalls->push(std::move(u));
  return PMIX_SUCCESS;
}

// OpenPMIx has this node's rank's data for another node's request (on its
// thread; `tag` was allocated by on_modex_frame).
void on_modex_data(pmix_status_t status, char* data, size_t size, void* tag) {
  Upcall u(Upcall::Kind::kModexData, 0, status);
  if (data != nullptr) u.data.assign(data, size);
  u.tag = *static_cast<std::uint64_t*>(tag);
  delete static_cast<std::uint64_t*>(tag);
  g_upcalls->push(std::move(u));
}

// PMIx_Spawn (Open MPI's MPI_Comm_spawn): refused at once, and the shell
// told (pmi::kSpawnRefused says why; the world's other ranks would wait for
// the spawn forever).
pmix_status_t on_spawn(const pmix_proc_t* proc, const pmix_info_t[], size_t, const pmix_app_t[],
                       size_t, pmix_spawn_cbfunc_t, void*) {
  g_upcalls->push(Upcall(Upcall::Kind::kSpawn, proc->rank));
  return PMIX_ERR_NOT_SUPPORTED;
}

// Calls `call(callback, data)`, one of PMIx's functions that finish through
// an operation callback, and waits for it.
template <typename Call>
pmix_status_t call_and_wait(Call call) {
  std::promise<pmix_status_t> done;
  auto callback = [](pmix_status_t status, void* data) {
    static_cast<std::promise<pmix_status_t>*>(data)->set_value(status);
  };
  const pmix_status_t rc = call(+callback, &done);
  if (rc == PMIX_OPERATION_SUCCEEDED) return PMIX_SUCCESS;
  if (rc != PMIX_SUCCESS) return rc;
  return done.get_future().get();
}

std::string pmix_error(const std::string& what, pmix_status_t rc) {
  return "PMIx server: " + what + ": " + PMIx_Error_string(rc);
}

// A list of pmix_info_t built one value at a time (PMIx copies each value).
class InfoList {
 public:
  ~InfoList() {
    for (pmix_info_t& i : infos_) PMIX_INFO_DESTRUCT(&i);
  }
  template <typename T>
  void add(const char* key, const T* value, pmix_data_type_t type) {
    infos_.emplace_back();
    PMIX_INFO_CONSTRUCT(&infos_.back());
    PMIX_INFO_LOAD(&infos_.back(), key, value, type);
  }
  void add_string(const char* key, const std::string& value) {
    add(key, value.c_str(), PMIX_STRING);
  }
  pmix_info_t* data() { return infos_.data(); }
  size_t size() const { return infos_.size(); }

 private:
  std::vector<pmix_info_t> infos_;
};

class PmixClients final : public MpiWorld {
 public:
  PmixClients(const JobLaunch& l, std::shared_ptr<WorldChannel> channel)
      : MpiWorld(std::move(channel)),
        nspace_(l.pmi.kvsname),
        nodes_(l.pmi.nodes),
        uid_(l.uid),
        gid_(l.gid),
        node_of_rank_(l.pmi.node_of_rank),
        node_ranks_(l.pmi.node_ranks),
        node_index_(l.pmi.node),
        max_kvs_bytes_(static_cast<std::size_t>(l.pmi.max_kvs_bytes)) {
    for (const TaskSpec& t : l.tasks) ranks_.push_back(t.rank);
    phase_.assign(ranks_.size(), Phase::kNew);
  }
  ~PmixClients() override {
    if (started_) PMIx_server_finalize();
    if (topology_ != nullptr) hwloc_topology_destroy(topology_);
    g_upcalls = nullptr;
  }

  bool start(const JobLaunch& l, const JobFiles& files, std::string& error) {
    if (upcalls_.fd() < 0) {
      error = "PMIx server: eventfd: " + errno_text(errno);
      return false;
    }
    // Its rendezvous files go in the job's directory, removed with it.
    const std::string dir = files.dir + "/pmix";
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      error = "PMIx server: mkdir " + dir + ": " + errno_text(errno);
      return false;
    }
    g_upcalls = &upcalls_;
    pmix_server_module_t module{};
    module.client_connected = on_connected;
    module.client_finalized = on_finalized;
    module.abort = on_abort;
    module.fence_nb = on_fence;
    module.direct_modex = on_direct_modex;
    module.spawn = on_spawn;
    InfoList init;
    init.add_string(PMIX_SERVER_TMPDIR, dir);
    init.add_string(PMIX_SYSTEM_TMPDIR, dir);
    // The job's user: OpenPMIx gives it its shared-memory store's files
    // (the tasks read the world's data there, not through the socket).
    const std::uint32_t uid = uid_, gid = gid_;
    init.add(PMIX_USERID, &uid, PMIX_UINT32);
    init.add(PMIX_GRPID, &gid, PMIX_UINT32);
    // Left to itself, OpenPMIx discovers the node with its I/O devices,
    // reading every PCI device's configuration: 12 of its 17 ms of start
    // here. The locality of the tasks needs only the CPUs, caches and
    // memory, which cost 3 ms to discover.
    pmix_topology_t topology{};
    if (load_cpu_topology()) {
      topology.source = const_cast<char*>("hwloc:" HWLOC_VERSION);
      topology.topology = topology_;
      init.add(PMIX_TOPOLOGY2, &topology, PMIX_TOPO);
      // And the tasks take it from the server (as XML: load_cpu_topology
      // turns off the shared-memory copy, a file CRIU would have to find
      // again at a restore) rather than each discover the node: Open MPI's
      // MPI_Init of 64 ranks on 4 emulated nodes here, 1.8-2.0 s -> 1.0-1.2.
      const bool share = true;
      init.add(PMIX_SERVER_SHARE_TOPOLOGY, &share, PMIX_BOOL);
    }
    pmix_status_t rc = PMIx_server_init(&module, init.data(), init.size());
    if (rc != PMIX_SUCCESS) {
      error = pmix_error("init", rc);
      return false;
    }
    started_ = true;
    InfoList world;
    describe_world(l, world);
    rc = call_and_wait([&](pmix_op_cbfunc_t cb, void* data) {
      return PMIx_server_register_nspace(nspace_.c_str(), static_cast<int>(ranks_.size()),
                                         world.data(), world.size(), cb, data);
    });
    if (rc != PMIX_SUCCESS) {
      error = pmix_error("registering namespace " + nspace_, rc);
      return false;
    }
    return true;
  }

  // Without it, OpenPMIx discovers the topology itself.
  bool load_cpu_topology() {
    // hwloc's plugins are for I/O devices (PCI, OpenCL, GL): loading them,
    // and the libraries they need, was half of the 6.5 ms this took. The
    // shell's environment is its own (the tasks get theirs from the launch).
    setenv("HWLOC_PLUGINS_PATH", "/dev/null", 1);
    setenv("PMIX_MCA_pmix_hwloc_hole_kind", "none", 1);  // no shared-memory copy
    if (hwloc_topology_init(&topology_) != 0) {
      topology_ = nullptr;
      return false;
    }
    hwloc_topology_set_io_types_filter(topology_, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(topology_) != 0) {
      hwloc_topology_destroy(topology_);
      topology_ = nullptr;
      return false;
    }
    return true;
  }

  bool add(std::size_t local, TaskStdio& stdio, std::string& error) override {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, nspace_.c_str(), static_cast<pmix_rank_t>(ranks_[local]));
    pmix_status_t rc = call_and_wait([&](pmix_op_cbfunc_t cb, void* data) {
      return PMIx_server_register_client(&proc, uid_, gid_, nullptr, cb, data);
    });
    if (rc != PMIX_SUCCESS) {
      error = pmix_error("registering task " + std::to_string(ranks_[local]), rc);
      return false;
    }
    char** env = nullptr;
    rc = PMIx_server_setup_fork(&proc, &env);
    for (char** e = env; e != nullptr && *e != nullptr; ++e) {
      const std::string var = *e;
      const std::size_t eq = var.find('=');
      if (eq != std::string::npos) stdio.mpi_env[var.substr(0, eq)] = var.substr(eq + 1);
      free(*e);
    }
    free(env);
    if (rc != PMIX_SUCCESS) {
      error = pmix_error("environment of task " + std::to_string(ranks_[local]), rc);
      return false;
    }
    // Open MPI 4.1 takes its PMIx (direct launch) path only under launchers
    // it knows (Slurm, Flux, IBM's jsrun); this variable alone makes it take
    // the jsrun one, which is exactly that path with the launcher's binding
    // kept (hpcq binds each task to its cores).
    stdio.mpi_env["JSM_JSRUN_PORT"] = "hpcq";
    return true;
  }

  void poll_fds(std::vector<pollfd>& fds) const override {
    fds.push_back({upcalls_.fd(), POLLIN, 0});
  }
  void on_readable(std::size_t) override { take_upcalls(); }

  bool task_ended(std::size_t local) override {
    take_upcalls();  // what it said before it went (finalize, abort) first
    const Phase was = phase_[local];
    if (was == Phase::kGone) return broken_by_.has_value();
    phase_[local] = Phase::kGone;
    const bool breaks = was == Phase::kConnected || (was == Phase::kNew && in_use_);
    if (was == Phase::kNew && !in_use_) gone_early_.insert(local);
    if (breaks && !broken_by_) broken_by_ = local;
    if (breaks) fence_failed("a rank of the job has ended");
    return broken_by_.has_value();
  }
  bool in_use() const override { return in_use_; }
  // A task connecting right now would find no server: its MPI_Init fails.
  bool drop_unused_pmix() override {
    take_upcalls();  // a connection already made counts
    if (in_use_) return false;
    if (started_) PMIx_server_finalize();
    started_ = false;
    return true;
  }
  std::optional<std::size_t> broken_by() const override { return broken_by_; }
  std::optional<pmi::Server::Abort> abort() const override { return abort_; }
  std::string key_space_refusal() const override {
    return refusal_.empty() ? MpiWorld::key_space_refusal() : refusal_;
  }

 protected:
  void fence_done(std::uint32_t seq, std::string data) override {
    if (!fence_ || seq != fence_seq_) return;
    ++fence_seq_;
    finish_fence(PMIX_SUCCESS, data);
  }
  // PMIx's answer carries a status, no text: the job's end names why.
  void fence_failed(const std::string& /*why*/) override {
    if (fence_) finish_fence(PMIX_ERR_LOST_CONNECTION, "");
    for (auto& [tag, asked] : std::exchange(modex_asked_, {})) {
      finish(asked.done, asked.done_data, PMIX_ERR_LOST_CONNECTION, "");
    }
  }

  void on_modex_frame(ModexFrame frame) override {
    if (frame.kind == ModexFrame::Kind::kRequest) {  // another node's, for one of our ranks
      pmix_proc_t proc;
      PMIX_LOAD_PROCID(&proc, nspace_.c_str(), frame.rank);
      auto* tag = new std::uint64_t(frame.tag);
      // OpenPMIx answers once the rank has committed its data.
      const pmix_status_t rc = PMIx_server_dmodex_request(&proc, on_modex_data, tag);
      if (rc != PMIX_SUCCESS) {
        delete tag;
        send_modex_answer(frame.tag, rc, "");
      }
      return;
    }
    auto asked = modex_asked_.find(frame.tag);
    if (asked == modex_asked_.end()) return;
    asked->second.data += frame.data;
    if (!frame.last) return;
    const Modex m = std::move(asked->second);
    modex_asked_.erase(asked);
    finish(m.done, m.done_data, frame.status, m.data);
  }

 private:
  enum class Phase { kNew, kConnected, kFinalized, kGone };
  struct Fence {
    pmix_modex_cbfunc_t done;
    void* done_data;
  };
  struct Modex {  // a local task's direct modex request, sent to another node
    pmix_modex_cbfunc_t done;
    void* done_data;
    std::string data;  // the answer's chunks so far
  };

  void describe_world(const JobLaunch& l, InfoList& info) const {
    const auto size = static_cast<std::uint32_t>(l.pmi.size);
    const auto local_size = static_cast<std::uint32_t>(ranks_.size());
    const auto nodes = static_cast<std::uint32_t>(l.pmi.nodes);
    const auto node_id = static_cast<std::uint32_t>(l.pmi.node);
    const std::uint32_t appnum = 0;
    const std::string host =
        l.pmi.node_names.empty() ? "" : l.pmi.node_names[static_cast<std::size_t>(l.pmi.node)];
    std::string peers;
    for (int r : ranks_) peers += (peers.empty() ? "" : ",") + std::to_string(r);
    const pmix_rank_t leader =
        static_cast<pmix_rank_t>(*std::min_element(ranks_.begin(), ranks_.end()));
    info.add(PMIX_UNIV_SIZE, &size, PMIX_UINT32);
    info.add(PMIX_JOB_SIZE, &size, PMIX_UINT32);
    info.add(PMIX_MAX_PROCS, &size, PMIX_UINT32);
    info.add(PMIX_LOCAL_SIZE, &local_size, PMIX_UINT32);
    info.add(PMIX_NODE_SIZE, &local_size, PMIX_UINT32);
    info.add(PMIX_NUM_NODES, &nodes, PMIX_UINT32);
    info.add(PMIX_NODEID, &node_id, PMIX_UINT32);
    info.add(PMIX_APPNUM, &appnum, PMIX_UINT32);
    info.add_string(PMIX_JOBID, nspace_);
    info.add_string(PMIX_LOCAL_PEERS, peers);
    info.add(PMIX_LOCALLDR, &leader, PMIX_PROC_RANK);
    if (!host.empty()) info.add_string(PMIX_HOSTNAME, host);
    // Which ranks run on which node, in PMIx's compressed forms.
    if (!l.pmi.node_of_rank.empty()) {
      std::string names, ppn;
      for (std::size_t n = 0; n < l.pmi.node_names.size(); ++n) {
        names += (n == 0 ? "" : ",") + l.pmi.node_names[n];
        std::string ranks;
        for (std::size_t r = 0; r < l.pmi.node_of_rank.size(); ++r) {
          if (l.pmi.node_of_rank[r] != static_cast<int>(n)) continue;
          ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
        }
        ppn += (n == 0 ? "" : ";") + ranks;
      }
      char* node_map = nullptr;
      char* proc_map = nullptr;
      if (PMIx_generate_regex(names.c_str(), &node_map) == PMIX_SUCCESS &&
          PMIx_generate_ppn(ppn.c_str(), &proc_map) == PMIX_SUCCESS) {
        info.add(PMIX_NODE_MAP, node_map, PMIX_REGEX);
        info.add(PMIX_PROC_MAP, proc_map, PMIX_REGEX);
      }
      free(node_map);
      free(proc_map);
    }
    // Each local task: its rank among the node's.
    for (std::size_t local = 0; local < ranks_.size(); ++local) {
      const auto rank = static_cast<pmix_rank_t>(ranks_[local]);
      const auto local_rank = static_cast<std::uint16_t>(local);
      pmix_data_array_t* proc;
      PMIX_DATA_ARRAY_CREATE(proc, host.empty() ? 5 : 6, PMIX_INFO);
      auto* p = static_cast<pmix_info_t*>(proc->array);
      PMIX_INFO_LOAD(&p[0], PMIX_RANK, &rank, PMIX_PROC_RANK);
      PMIX_INFO_LOAD(&p[1], PMIX_APPNUM, &appnum, PMIX_UINT32);
      PMIX_INFO_LOAD(&p[2], PMIX_LOCAL_RANK, &local_rank, PMIX_UINT16);
      PMIX_INFO_LOAD(&p[3], PMIX_NODE_RANK, &local_rank, PMIX_UINT16);
      PMIX_INFO_LOAD(&p[4], PMIX_NODEID, &node_id, PMIX_UINT32);
      if (!host.empty()) PMIX_INFO_LOAD(&p[5], PMIX_HOSTNAME, host.c_str(), PMIX_STRING);
      info.add(PMIX_PROC_DATA, proc, PMIX_DATA_ARRAY);
      PMIX_DATA_ARRAY_FREE(proc);
    }
  }

  void take_upcalls() {
    for (Upcall& u : upcalls_.take()) {
      const auto it = std::find(ranks_.begin(), ranks_.end(), static_cast<int>(u.rank));
      const std::size_t local = static_cast<std::size_t>(it - ranks_.begin());
      switch (u.kind) {
        case Upcall::Kind::kConnected:
          if (local < phase_.size() && phase_[local] == Phase::kNew)
            phase_[local] = Phase::kConnected;
          // Other nodes may ask for this node's ranks' data before any
          // fence: the channel that brings their requests (the executor
          // queues them until then) opens with the first task's PMIx, so
          // that a job whose tasks use none can be checkpointed.
          if (!in_use_ && nodes_ > 1 && !open_channel()) {
            fprintf(stderr, "hpcq-job-shell: PMIx: no channel to the agent\n");
          }
          in_use_ = true;
          // A task that ended before any began is missing from this world.
          if (!gone_early_.empty() && !broken_by_) broken_by_ = *gone_early_.begin();
          break;
        case Upcall::Kind::kFinalized:
          if (local < phase_.size() && phase_[local] != Phase::kGone)
            phase_[local] = Phase::kFinalized;
          break;
        case Upcall::Kind::kAbort:
          if (!abort_) abort_ = pmi::Server::Abort{static_cast<int>(u.rank), u.code, u.data};
          break;
        case Upcall::Kind::kFence: begin_fence(std::move(u)); break;
        case Upcall::Kind::kModexRequest: ask_for_modex(u); break;
        case Upcall::Kind::kModexData: send_modex_answer(u.tag, u.code, u.data); break;
        case Upcall::Kind::kSpawn: spawn_refused(static_cast<int>(u.rank)); break;
      }
      end_world_if_broken();
    }
  }

  void begin_fence(Upcall u) {
    if (fence_ || broken_by_ || abort_) {  // one at a time; none in a broken world
      finish(u.done, u.done_data, PMIX_ERR_LOST_CONNECTION, "");
      return;
    }
    // The node's keys are PMIx's, put and committed in the tasks: the
    // server sees them first here, as the fence's data. Past the job's
    // limit the fence fails (PMIx_Fence returns PMIX_ERR_OUT_OF_RESOURCE).
    if (u.data.size() > max_kvs_bytes_) {
      if (refusal_.empty()) {
        refusal_ = "PMI key space of " + nspace_ + " full: this node's part of a PMIx fence " +
                   "takes " + std::to_string(u.data.size()) + " bytes, past the limit of " +
                   std::to_string(max_kvs_bytes_) + " ([agent] pmi_max_kvs_bytes)";
      }
      fprintf(stderr, "hpcq-job-shell: %s\n", refusal_.c_str());
      finish(u.done, u.done_data, PMIX_ERR_OUT_OF_RESOURCE, "");
      return;
    }
    if (nodes_ <= 1) {  // the node holds the whole world
      finish(u.done, u.done_data, PMIX_SUCCESS, u.data);
      return;
    }
    fence_ = Fence{u.done, u.done_data};
    if (!send_fence(fence_seq_, u.data)) fence_failed("no channel to the agent");
  }
  // Asks the node that runs rank u.rank for its data.
  void ask_for_modex(const Upcall& u) {
    const std::size_t node = u.rank < node_of_rank_.size()
                                 ? static_cast<std::size_t>(node_of_rank_[u.rank])
                                 : node_ranks_.size();
    if (broken_by_ || abort_ || node >= node_ranks_.size() ||
        static_cast<int>(node) == node_index_) {
      finish(u.done, u.done_data, PMIX_ERR_NOT_FOUND, "");
      return;
    }
    ModexFrame frame;
    frame.tag = ++modex_tag_;
    frame.rank = u.rank;
    frame.node = node_ranks_[node];
    modex_asked_[frame.tag] = Modex{u.done, u.done_data, ""};
    if (!send_modex(frame)) {
      modex_asked_.erase(frame.tag);
      finish(u.done, u.done_data, PMIX_ERR_LOST_CONNECTION, "");
    }
  }
  void send_modex_answer(std::uint64_t tag, pmix_status_t status, const std::string& data) {
    for (const ModexFrame& frame : split_modex(tag, status, data)) {
      if (!send_modex(frame)) return;
    }
  }
  void finish_fence(pmix_status_t status, const std::string& data) {
    const Fence f = *std::exchange(fence_, std::nullopt);
    finish(f.done, f.done_data, status, data);
  }
  // Hands PMIx the fence's outcome, a copy it releases when done with it.
  static void finish(pmix_modex_cbfunc_t done, void* done_data, pmix_status_t status,
                     const std::string& data) {
    if (done == nullptr) return;
    auto* copy = new std::string(data);
    done(
        status, copy->data(), copy->size(), done_data,
        [](void* c) { delete static_cast<std::string*>(c); }, copy);
  }

  UpcallQueue upcalls_;
  std::string nspace_;
  int nodes_;
  uid_t uid_;
  gid_t gid_;
  bool started_ = false;
  hwloc_topology_t topology_ = nullptr;  // PMIx's, which it borrows until finalized
  std::vector<int> ranks_;               // the world rank of each local task
  std::vector<Phase> phase_;
  bool in_use_ = false;
  std::set<std::size_t> gone_early_;  // tasks gone before any connected
  std::optional<std::size_t> broken_by_;
  std::optional<pmi::Server::Abort> abort_;
  std::optional<Fence> fence_;  // the fence in flight across nodes
  std::uint32_t fence_seq_ = 0;
  std::vector<int> node_of_rank_;          // JobLaunch::pmi.node_of_rank
  std::vector<std::uint32_t> node_ranks_;  // JobLaunch::pmi.node_ranks
  int node_index_ = 0;                     // JobLaunch::pmi.node
  std::size_t max_kvs_bytes_;              // JobLaunch::pmi.max_kvs_bytes
  std::string refusal_;                    // why a fence was refused for it, the first time
  // This node's direct modex requests in flight, by tag (a 32-bit count:
  // the agent there keeps the tag's low half only).
  std::map<std::uint64_t, Modex> modex_asked_;
  std::uint32_t modex_tag_ = 0;
};

}  // namespace

std::unique_ptr<MpiWorld> start_pmix_world(const JobLaunch& l, const JobFiles& files,
                                           std::shared_ptr<WorldChannel> channel,
                                           std::string& error) {
  auto world = std::make_unique<PmixClients>(l, std::move(channel));
  if (!world->start(l, files, error)) return nullptr;
  return world;
}

}  // namespace hpcq::agent
