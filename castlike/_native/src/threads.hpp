// The one thread pool of the process.  It lives in castlike._native._threads; every kernel
// module (one per CPU level) reaches it through the capsule named below, so that however many
// levels a process imports, castlike's kernels run on at most set_num_threads() threads in all.
//
// Nothing here throws or touches Python: the pool is driven with the GIL released.
#pragma once

#include <cstddef>

namespace castlike {

//: Changed whenever PoolApi changes: a kernel module refuses a pool built from other sources.
constexpr unsigned kPoolAbi = 4;

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

//: What the calling thread did in one run: the units it ran itself and the nanoseconds that
//: took (its own pieces only, not the wait for helpers), from which a kernel learns its speed.
struct PoolReport {
  std::size_t caller_units = 0;
  long caller_ns = 0;
};

struct PoolApi {
  unsigned abi;
  //: Run `task` over [0, n) in pieces on at most `threads` threads, the caller among them,
  //: and within the process's limit (set_num_threads): the caller first waits for a free
  //: slot.  The pieces shrink as the work runs out: each is half of what is left split among
  //: the threads, at least `grain` and a multiple of it (one piece of n where no worker
  //: helps).  Returns when every piece has run.  Call it with the GIL released: it may wait,
  //: for a slot and for the workers that help.
  //:
  //: `expected_ns` is the caller's estimate of the work's time on one thread (0: unknown);
  //: `report`, where not null, receives what the calling thread did (PoolReport).
  //: Workers that are awake (they spin for a while after helping) join any job; a sleeping
  //: one is woken only when the work is expected to take long against the cost of waking it,
  //: or unknown, or when casts come in a stream (the last run ended a moment ago).
  void (*run)(const PoolTask& task, std::size_t n, std::size_t grain, int threads,
              long expected_ns, PoolReport* report) noexcept;
  //: The process's limit (set_num_threads, which sets it; 1 until then).
  int (*limit)() noexcept;
};

}  // namespace castlike
