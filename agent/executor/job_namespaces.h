// The mount namespace a job lives in, entered by the process that becomes
// its PID 1 (made with CLONE_NEWPID) before it execs: the job shell's child
// of clone() (process_executor_launch.cc, exec_shell) and the process that
// CRIU's trial dump makes to stand for a job (checkpoint.cc), so that the
// trial dumps what a job's dump meets.
//
// What it gives the job: a mount namespace of its own (a private copy of the
// node's mounts, none of its changes seen by the node), a proc of the job's
// PID namespace over /proc (ps, pgrep, /proc/self and /proc/<pid>/fd show
// the job's processes, and only them), and optionally the job's own /tmp and
// /dev/shm (bind mounts). CRIU dumps this namespace with the job: where the
// node's root is not its mount namespace's root (a chroot), it cannot.
//
// Threads: called only in a child between clone() and execve(), which may
// share the parent's memory (CLONE_VM): async-signal-safe, no allocation,
// not instrumented by sanitizers.
// Errors: nullptr on success; otherwise a static line naming the step that
// failed (errno is left as that step set it).
#pragma once

namespace hpcq::agent {

// `private_tmp` and `private_shm` are bound over /tmp and /dev/shm; null
// `private_tmp`: the node's own are kept.
const char* enter_job_mount_namespace(const char* private_tmp, const char* private_shm);

}  // namespace hpcq::agent
