// The one thread pool of the process.  It lives in castlike._native._threads; every kernel
// module (one per CPU level) reaches it through the capsule named below, so that however many
// levels a process imports, castlike's kernels run on at most set_num_threads() threads in all.
//
// Nothing here throws or touches Python: the pool is driven with the GIL released.
#pragma once

#include <cstddef>

namespace castlike {

//: Changed whenever PoolApi changes: a kernel module refuses a pool built from other sources.
constexpr unsigned kPoolAbi = 2;

//: The module that holds the pool and the name of its capsule attribute.
constexpr const char* kPoolModule = "castlike._native._threads";
constexpr const char* kPoolAttribute = "_api";
constexpr const char* kPoolCapsule = "castlike._native._threads._api";

//: Work over [0, n): `run(context, begin, end)` on disjoint ranges that together cover it, on
//: any thread.  `run` must neither throw nor touch Python.
struct PoolTask {
  void (*run)(const void* context, std::size_t begin, std::size_t end) noexcept;
  const void* context;
};

struct PoolApi {
  unsigned abi;
  //: Run `task` over [0, n) in chunks of `chunk` elements on at most `threads` threads, the
  //: caller among them, and within the process's limit (set_num_threads): the caller first
  //: waits for a free slot.  Returns when every chunk has run.  Call it with the GIL released:
  //: it may wait, for a slot and for the workers that help.
  void (*run)(const PoolTask& task, std::size_t n, std::size_t chunk, int threads) noexcept;
  //: The process's limit (set_num_threads, which sets it; 1 until then).
  int (*limit)() noexcept;
};

}  // namespace castlike
