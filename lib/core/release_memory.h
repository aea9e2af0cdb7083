// Hands the allocator's free memory back to the operating system.
//
// hpcqd and hpcq-agent allocate with tcmalloc (gperftools; meson.build's
// daemon_malloc_dep), which keeps freed pages for reuse and returns them to
// the OS only slowly (TCMALLOC_RELEASE_RATE): after a burst of large
// buffers (a PMI fence of many megabytes) the daemon's resident size would
// stay at its peak. Call this once such a burst is freed. Where tcmalloc is
// not linked (a sanitized build, the tests) it does nothing: the symbol is
// weak. Any thread; it takes tcmalloc's page heap lock for a moment.
#pragma once

extern "C" void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));

namespace hpcq {

inline void release_free_memory() {
  if (MallocExtension_ReleaseFreeMemory != nullptr) MallocExtension_ReleaseFreeMemory();
}

}  // namespace hpcq
