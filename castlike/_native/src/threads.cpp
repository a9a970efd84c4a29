// castlike._native._threads: the process's one pool of worker threads for the native kernels
// (threads.hpp says how the kernel modules reach it).
//
// * Persistent: a worker is started when a large cast first wants one, at most
//   set_num_threads() - 1 of them (the calling thread is the other), and then waits for work.
//   A lower limit leaves the surplus parked, waiting without a slot, until a higher one lets
//   them work again: a limit moved down and back up (a benchmark's one-thread and two-thread
//   calls in turn) starts no thread inside a cast.  Starting one there had cost a two-thread
//   10**7-element cast 0.34-0.41 ms on a 2-core Zen 4, more than a second thread gained on a
//   memory-bound one.
// * One limit for the whole process: every thread that runs a kernel, a caller or a worker,
//   holds one of `limit` slots.  Casts from several Python threads (Dask's threaded scheduler,
//   a ThreadPoolExecutor) share them, so nested parallelism never runs more threads than the
//   limit; a caller that finds every slot taken waits, with the GIL released.
// * Safe across fork: the child drops the parent's pool (whose threads it does not have, and
//   whose mutex another parent thread may have held) and builds a new one on first use.
// * Nothing throws: POSIX threads directly, and a worker that cannot be started (a pid or a
//   memory limit) leaves its share of the work to the threads there are.
// * A caller whose helpers are still on their last pieces spins for them (at most kJoinSpinNs)
//   before it sleeps: a thread asleep on a condition variable takes microseconds to run again
//   once woken, tens of them in a virtual machine whose idle CPU has halted.  On a 2-core KVM
//   guest (Zen 5), FLOAT -> FLOAT8E4M3FN of 4 * 10**6 elements on two threads, back to back
//   with the input in the cache, went from 0.20 to 0.17 ms (one thread: 0.27).
// * Waking a sleeping worker is worth it only for long work: on that guest it cost the caller
//   10-280 us, and after the whole machine had been idle a two-thread cast of 10**7 elements
//   took as long as one thread.  So a worker that has just helped spins for the next job (at
//   most kStreamNs) before it sleeps, and a caller wakes a sleeping one only for work expected
//   to take kWakeNs or more on one thread (the kernel module learns each kernel's speed from
//   its calls), or of unknown length, or that follows the last cast within kStreamNs (a
//   stream, whose next casts then find the worker awake).  Any other cast runs on the caller
//   alone, as one piece, unless a worker is awake to help.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <new>

#include "threads.hpp"

namespace castlike {
namespace {

// -- POSIX primitives that report errors by value (a default, statically initialised mutex has
// none to report) instead of throwing as std::mutex may ---------------------------------------

class Mutex {
 public:
  void lock() noexcept { pthread_mutex_lock(&mutex_); }
  void unlock() noexcept { pthread_mutex_unlock(&mutex_); }
  pthread_mutex_t* native() noexcept { return &mutex_; }

 private:
  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
};

class Lock {
 public:
  explicit Lock(Mutex& mutex) noexcept : mutex_(mutex) { mutex_.lock(); }
  ~Lock() { mutex_.unlock(); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  Mutex& mutex() noexcept { return mutex_; }

 private:
  Mutex& mutex_;
};

class Condition {
 public:
  void wait(Lock& lock) noexcept { pthread_cond_wait(&cond_, lock.mutex().native()); }
  void notify_all() noexcept { pthread_cond_broadcast(&cond_); }

 private:
  pthread_cond_t cond_ = PTHREAD_COND_INITIALIZER;
};

//: A worker's stack: the kernels need a few KiB (a block of indices); 1 MiB leaves room for
//: sanitizer builds and costs less address space than the usual 8 MiB.
constexpr size_t kWorkerStack = size_t{1} << 20;

//: How long a caller spins for its helpers' last pieces before it sleeps: a piece is at least
//: 2**14 elements, microseconds of work; a longer wait means that the helper lost its CPU, and
//: then sleeping costs nothing.
constexpr long kJoinSpinNs = 200'000;

//: A worker that has just helped spins this long for the next job before it sleeps, and a cast
//: that starts within this long of the last one's end is taken for one of a stream (testing
//: aid: _wake_policy sets it).  On a 2-core KVM guest (Zen 5), FLOAT -> FLOAT8E4M3FN in a loop
//: with 0.3-0.9 ms of other work or sleep between the casts: two threads gained 1.1-2.0x with
//: 1 ms (2**20 and 4e6 elements), none with 0.2 ms (0.73-1.04x); after 1.1 ms, beyond it, the
//: casts run on one thread either way.  Spinning costs the second CPU that long after a cast.
constexpr long kStreamNs = 1'000'000;

//: A sleeping worker is woken for work expected to take at least this long on one thread
//: (testing aid: _wake_policy sets it).  On a 2-core KVM guest (Zen 5) waking one cost the
//: caller 10-280 us, more after the whole machine had idled: after 2 ms asleep, a two-thread
//: cast of 4e6 FLOATs (0.3-0.5 ms on one thread) took 1.2-1.3x as long as one thread, and one
//: of 10**7 (1.1-1.3 ms) about as long (0.95-1.0x the speed); after 2 ms spent copying memory
//: instead, the cast of 10**7 gained 1.15-1.7x.  (Telling those two apart by the process's CPU
//: time costs a system call, which took 11 us after a cast of 2**20 elements: not done.)
constexpr long kWakeNs = 1'000'000;

//: Tells the CPU that this is a spin-wait loop (it saves power and frees the core's other
//: hardware thread, if any).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

long monotonic_ns() noexcept {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return long(now.tv_sec) * 1'000'000'000L + now.tv_nsec;
}

//: Spins until `ready()` or `limit_ns` have passed; returns `ready()`.
template <class Ready>
bool spin_until(Ready ready, long limit_ns) noexcept {
  const long start = monotonic_ns();
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if (i % 64 == 0 && monotonic_ns() - start > limit_ns) return ready();
  }
}

// -- the pool --------------------------------------------------------------------------------------

//: One call's work, on the caller's stack: pieces are claimed in order by the caller and by the
//: workers that join it, so a worker that starts late still takes a share.  The pieces shrink
//: as the work runs out (guided scheduling): each is a share of what is left, so the threads
//: finish close together, where a fixed chunk left one waiting up to a chunk's time for the
//: other.  Two threads, back to back, 2-core Zen 5, against 8 fixed chunks: 2**21-4e6
//: elements 1.01-1.13x faster (FLOAT -> INT8 0.128 -> 0.114 ms at 4e6), 10**7 0.98-1.07x,
//: 3e7 0.98-1.01x.
struct Job {
  Job(const PoolTask& t, size_t size, size_t smallest) noexcept
      : task(t), n(size), grain(smallest) {}

  //: Claims the next piece, [begin, end): half of what is left split among the threads, at
  //: least `grain`, in multiples of it; false when nothing is left.
  bool claim(size_t& begin, size_t& end) noexcept {
    begin = next.load(std::memory_order_relaxed);
    for (;;) {
      if (begin >= n) return false;
      const size_t left = n - begin;
      const size_t share = left / (2 * size_t(threads));
      const size_t size = std::min(left, std::max(grain, (share + grain - 1) / grain * grain));
      if (next.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed)) {
        end = begin + size;
        return true;
      }
    }
  }

  //: Runs pieces until none is left; returns the units this thread ran.
  size_t drain() noexcept {
    size_t done = 0;
    size_t begin = 0, end = 0;
    while (claim(begin, end)) {
      task.run(task.context, begin, end);
      done += end - begin;
    }
    return done;
  }

  const PoolTask& task;
  const size_t n;
  // Set before the job is posted:
  size_t grain;     // the smallest piece (n: one piece, when no worker helps)
  int threads = 1;  // the caller and the workers reserved for the job
  std::atomic<size_t> next{0};
  //: Workers running pieces of this job.  Raised under the pool's mutex when one joins; a
  //: worker lowers it (release) as its last touch of the job, so the caller, which spins on
  //: it without the mutex, may return as soon as it reads 0.
  std::atomic<int> active{0};
  // Guarded by the pool's mutex:
  int reserved = 0;         // slots reserved for workers that have not joined yet
  Job* queued = nullptr;    // the next job in the queue
};

class Pool {
 public:
  explicit Pool(int limit) noexcept : limit_(limit) {}

  void set_limit(int limit) noexcept {
    Lock lock(mutex_);
    limit_ = limit;
    slots_.notify_all();  // callers waiting for a slot may find one under a higher limit
  }

  int workers() noexcept {
    Lock lock(mutex_);
    return workers_;
  }

  int peak_running(bool reset) noexcept {
    Lock lock(mutex_);
    const int peak = peak_;
    if (reset) peak_ = running_;
    return peak;
  }

  struct WakePolicy {
    long wake_ns = kWakeNs;
    long stream_ns = kStreamNs;
  };

  //: Sets the policy (with `set`) and returns the one before.
  WakePolicy wake_policy(const WakePolicy* set) noexcept {
    Lock lock(mutex_);
    const WakePolicy before = policy_;
    if (set != nullptr) policy_ = *set;
    return before;
  }

  void run(const PoolTask& task, size_t n, size_t grain, int threads, long expected_ns,
           PoolReport* report) noexcept {
    Job job(task, n, std::max<size_t>(grain, 1));
    {
      Lock lock(mutex_);
      ++waiting_;
      while (take_slots(1) == 0) slots_.wait(lock);
      --waiting_;
      started();
      const size_t more_pieces = (n - 1) / job.grain;  // the most beyond the caller's first
      int helpers = threads - 1;
      if (size_t(std::max(helpers, 0)) > more_pieces) helpers = int(more_pieces);
      if (helpers > 0 && !worth_waking(expected_ns)) helpers = std::min(helpers, spinning_);
      if (helpers > 0) {
        start_workers(helpers);
        helpers = take_slots(std::min(helpers, idle()));
      }
      if (helpers == 0) {
        // One call over everything: a kernel decides per call how to store (streaming stores
        // for outputs beyond the core's cache), and a run of small chunks made one thread
        // 3-13% slower (FLOAT -> FLOAT8E4M3FN, 2**20-2**22 elements, Zen 5).
        job.grain = n;
      } else {
        job.threads = helpers + 1;
        job.reserved = helpers;
        reserved_ += helpers;
        push(&job);
        posted_.fetch_add(1, std::memory_order_release);  // for the workers that spin
        if (helpers > spinning_) work_.notify_all();
      }
    }
    const long start = report != nullptr ? monotonic_ns() : 0;
    const size_t done = job.drain();
    if (report != nullptr) *report = PoolReport{done, monotonic_ns() - start};
    Lock lock(mutex_);
    if (job.reserved > 0) {  // every piece is taken: workers that have not joined need not
      unlink(&job);
      reserved_ -= job.reserved;
      give_slots(job.reserved);
      job.reserved = 0;
    }
    // No worker joins now (the job is out of the queue): wait for those on their last pieces,
    // spinning first, without the mutex, which they take when they finish.
    const auto helpers_done = [&job] { return job.active.load(std::memory_order_acquire) == 0; };
    if (!helpers_done()) {
      mutex_.unlock();
      spin_until(helpers_done, kJoinSpinNs);
      mutex_.lock();
      while (!helpers_done()) done_.wait(lock);
    }
    finished();
    give_slots(1);
    last_end_ns_ = monotonic_ns();  // a cast that starts soon is one of a stream
  }

 private:
  static void* worker_main(void* self) noexcept {
    static_cast<Pool*>(self)->work();
    return nullptr;
  }

  void work() noexcept {
    Lock lock(mutex_);
    bool helped = false;
    for (;;) {
      if (Job* job = head_) {  // its reserved slot becomes this worker's
        if (--job->reserved == 0) unlink(job);
        --reserved_;
        job->active.fetch_add(1, std::memory_order_relaxed);
        ++helping_;
        started();
        mutex_.unlock();
        job->drain();
        mutex_.lock();
        // Counted out (its slot given back) before the job may end: a cast returns with its
        // helpers off the running count and their slots free, not a preempted instant later.
        finished();
        --helping_;
        give_slots(1);
        job->active.fetch_sub(1, std::memory_order_release);  // the job may end now
        done_.notify_all();  // a caller may be asleep waiting for its helpers
        helped = true;
        continue;
      }
      if (helped && policy_.stream_ns > 0) {  // another cast may follow soon: stay awake for it
        helped = false;
        ++spinning_;
        const unsigned seen = posted_.load(std::memory_order_relaxed);
        const long limit_ns = policy_.stream_ns;
        mutex_.unlock();
        spin_until([&] { return posted_.load(std::memory_order_acquire) != seen; }, limit_ns);
        mutex_.lock();
        --spinning_;
        continue;  // to the queue, which a job posted meanwhile is in
      }
      helped = false;
      work_.wait(lock);  // parked (also while a lower limit leaves no slot for it)
    }
  }

  //: Whether a sleeping worker is worth waking for work expected to take `expected_ns` on one
  //: thread (0: unknown): when it is long, or unknown, or one of a stream of casts, whose next
  //: ones find the worker awake (mutex held).
  bool worth_waking(long expected_ns) const noexcept {
    if (expected_ns <= 0 || expected_ns >= policy_.wake_ns) return true;
    return last_end_ns_ != 0 && monotonic_ns() - last_end_ns_ < policy_.stream_ns;
  }

  //: Start workers (with the mutex held) until `wanted` are idle, within limit - 1 in all.
  void start_workers(int wanted) noexcept {
    while (idle() < wanted && workers_ < limit_ - 1) {
      if (!spawn()) return;  // no thread to be had now: the threads there are do the work
      ++workers_;
    }
  }

  bool spawn() noexcept {
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return false;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, kWorkerStack);
    // Workers never run Python: signals are for the interpreter's threads, so a worker starts
    // with every signal blocked (it inherits the mask it is created with).
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pthread_t thread;
    const int error = pthread_create(&thread, &attr, &Pool::worker_main, this);
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    pthread_attr_destroy(&attr);
    return error == 0;
  }

  //: Workers neither helping nor promised to a job (mutex held).
  int idle() const noexcept { return workers_ - helping_ - reserved_; }

  // The helpers below run with the mutex held.

  //: Takes up to `wanted` free slots (none while a lowered limit is still exceeded); returns
  //: how many it took.
  int take_slots(int wanted) noexcept {
    const int taken = std::max(0, std::min(wanted, limit_ - busy_));
    busy_ += taken;
    return taken;
  }

  //: Gives slots back and wakes the callers waiting for one.
  void give_slots(int count) noexcept {
    busy_ -= count;
    if (waiting_ > 0) slots_.notify_all();
  }

  void started() noexcept { peak_ = std::max(peak_, ++running_); }
  void finished() noexcept { --running_; }

  void push(Job* job) noexcept {
    job->queued = nullptr;
    (tail_ != nullptr ? tail_->queued : head_) = job;
    tail_ = job;
  }

  void unlink(Job* job) noexcept {
    Job* previous = nullptr;
    for (Job* j = head_; j != nullptr; previous = j, j = j->queued) {
      if (j != job) continue;
      (previous != nullptr ? previous->queued : head_) = j->queued;
      if (tail_ == j) tail_ = previous;
      return;
    }
  }

  Mutex mutex_;
  Condition work_;   // workers wait for a job
  Condition slots_;  // callers wait for a slot
  Condition done_;   // callers wait for their helpers to finish
  // Guarded by mutex_:
  int limit_;
  int busy_ = 0;      // slots taken: running callers and workers, and reservations
  int waiting_ = 0;   // callers waiting for a slot
  int running_ = 0;   // threads running kernels now
  int peak_ = 0;      // the most running at once (a testing aid)
  int workers_ = 0;   // live worker threads
  int helping_ = 0;   // workers running a job's pieces
  int reserved_ = 0;  // slots reserved for workers that have not joined their job yet
  int spinning_ = 0;  // workers awake, spinning for the next job
  WakePolicy policy_;
  long last_end_ns_ = 0;  // when the last run ended (monotonic_ns; 0: none yet)
  Job* head_ = nullptr;
  Job* tail_ = nullptr;
  //: Jobs posted so far (wrapping): what a spinning worker watches, without the mutex.
  std::atomic<unsigned> posted_{0};
};

// -- the process's pool, rebuilt after fork --------------------------------------------------------

std::atomic<int> g_limit{1};
std::atomic<Pool*> g_pool{nullptr};

//: In a child after fork: forget the parent's pool.  Its workers do not exist here and its
//: mutex may be held for ever, so it is left alone (a small, deliberate leak).
void forget_pool_after_fork() { g_pool.store(nullptr, std::memory_order_relaxed); }

//: The pool, built on first use; nullptr only when even that small allocation failed.
Pool* pool() noexcept {
  Pool* current = g_pool.load(std::memory_order_acquire);
  if (current != nullptr) return current;
  Pool* fresh = new (std::nothrow) Pool(g_limit.load(std::memory_order_relaxed));
  if (fresh == nullptr) return nullptr;
  if (g_pool.compare_exchange_strong(current, fresh, std::memory_order_acq_rel)) return fresh;
  delete fresh;  // another thread built one first (no thread of `fresh` has started)
  return current;
}

// Without a pool (out of memory), the caller runs everything, uncounted.
void api_run(const PoolTask& task, size_t n, size_t grain, int threads, long expected_ns,
             PoolReport* report) noexcept {
  if (n == 0) return;
  if (Pool* p = pool()) {
    p->run(task, n, grain, threads, expected_ns, report);
  } else {
    const long start = report != nullptr ? monotonic_ns() : 0;
    task.run(task.context, 0, n);
    if (report != nullptr) *report = PoolReport{n, monotonic_ns() - start};
  }
}

int api_limit() noexcept { return g_limit.load(std::memory_order_relaxed); }

const PoolApi kApi = {kPoolAbi, &api_run, &api_limit};

// -- Python functions --------------------------------------------------------------------------

PyObject* set_limit(PyObject*, PyObject* arg) {
  int overflow = 0;
  const long n = PyLong_AsLongAndOverflow(arg, &overflow);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  if (overflow != 0 || n < 1 || n > INT_MAX) {
    PyErr_Format(PyExc_ValueError, "the thread limit must be an int from 1 to %d", INT_MAX);
    return nullptr;
  }
  g_limit.store(int(n), std::memory_order_relaxed);
  if (Pool* p = pool()) p->set_limit(int(n));
  Py_RETURN_NONE;
}

PyObject* get_limit(PyObject*, PyObject*) {
  return PyLong_FromLong(g_limit.load(std::memory_order_relaxed));
}

PyObject* workers(PyObject*, PyObject*) {
  Pool* p = g_pool.load(std::memory_order_acquire);
  return PyLong_FromLong(p != nullptr ? p->workers() : 0);
}

PyObject* peak_running(PyObject*, PyObject* arg) {
  const int reset = PyObject_IsTrue(arg);
  if (reset < 0) return nullptr;
  Pool* p = g_pool.load(std::memory_order_acquire);
  return PyLong_FromLong(p != nullptr ? p->peak_running(reset != 0) : 0);
}

PyObject* wake_policy(PyObject*, PyObject* args) {
  Pool::WakePolicy set;
  if (!PyArg_ParseTuple(args, "|ll:_wake_policy", &set.wake_ns, &set.stream_ns)) return nullptr;
  const Py_ssize_t given = PyTuple_GET_SIZE(args);
  if ((given != 0 && given != 2) || set.wake_ns < 0 || set.stream_ns < 0) {
    PyErr_SetString(PyExc_ValueError, "_wake_policy takes no argument, or two of at least 0");
    return nullptr;
  }
  Pool* p = pool();
  if (p == nullptr) return PyErr_NoMemory();
  const Pool::WakePolicy before = p->wake_policy(given == 2 ? &set : nullptr);
  return Py_BuildValue("(ll)", before.wake_ns, before.stream_ns);
}

PyMethodDef kMethods[] = {
    {"set_limit", set_limit, METH_O,
     "Set the most threads that run castlike's kernels at once in this process."},
    {"get_limit", get_limit, METH_NOARGS, "The limit set_limit set (1 until then)."},
    {"workers", workers, METH_NOARGS, "Worker threads the pool holds now (0 before any)."},
    {"_peak_running", peak_running, METH_O,
     "Testing aid: the most threads that ran kernels at once (since the last reset, if the "
     "argument is true: then the count restarts from the threads running now)."},
    {"_wake_policy", wake_policy, METH_VARARGS,
     "Testing aid: (wake_ns, stream_ns), the pool's policy for waking a sleeping worker: for "
     "work expected to take at least wake_ns on one thread, or that starts within stream_ns of "
     "the last cast's end (also how long a worker spins after helping).  With two ints, sets "
     "them and returns the previous pair.  A forked child's new pool has the defaults."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       kPoolModule,
                       "The one thread pool of castlike's native kernels.",
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace
}  // namespace castlike

PyMODINIT_FUNC PyInit__threads() {
  using namespace castlike;
  static bool at_fork_registered = false;
  if (!at_fork_registered) {
    if (pthread_atfork(nullptr, nullptr, &forget_pool_after_fork) != 0) {
      PyErr_SetString(PyExc_ImportError, "castlike._native._threads: pthread_atfork failed");
      return nullptr;
    }
    at_fork_registered = true;
  }
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  PyObject* capsule =
      PyCapsule_New(const_cast<PoolApi*>(&kApi), kPoolCapsule, nullptr);
  if (capsule == nullptr || PyModule_AddObject(m, kPoolAttribute, capsule) < 0) {
    Py_XDECREF(capsule);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
