"""The native kernels' threads: one persistent pool, one limit for the whole process.

* ``set_num_threads`` takes 1 to ``MAX_THREADS`` and refuses anything else with a
  :class:`castlike.CastValueError`, leaving the setting (and every later cast) as it was;
  ``CASTLIKE_NUM_THREADS`` is checked the same way at import.
* A large cast runs on the calling thread and the workers of one pool that the process keeps:
  later casts start no thread, and the pool follows ``set_num_threads``.
* Casts from several Python threads, a ``ThreadPoolExecutor`` or Dask's threaded scheduler
  share the limit: never more than ``set_num_threads()`` threads run kernels at once, and the
  process holds only ``set_num_threads() - 1`` workers besides its own threads.
* After ``fork`` the child builds its own pool, also while the parent's threads were casting.

Thread counts are read from ``/proc/self/task`` in a child interpreter, which has no thread
that another test left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import castlike
from castlike import CastValueError, _native

needs_native = pytest.mark.skipif(
    _native.module() is None, reason="castlike's native extension is not built or disabled"
)
needs_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="counts threads in /proc/self/task (Linux)"
)

#: Children start here, where no castlike package is: they import the installed one, as the
#: tests do (``nox -s sanitize`` installs a sanitized build; the checkout has another).
HERE = Path(__file__).parent

#: Elements of a large cast: split across up to 16 threads (at least 2**18 elements each).
LARGE = 1 << 22


@pytest.fixture
def restore_threads() -> Any:
    before = castlike.get_num_threads()
    yield
    castlike.set_num_threads(before)


def _large_cast_bits() -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(4).standard_normal(LARGE).astype(np.float32) * 300
    return x, castlike.cast(x, "FLOAT8E4M3FN").view(np.uint8)


# -- the setting --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [2**70, 0, -1, _native.MAX_THREADS + 1, True, False, 2.0, "2", None, np.float64(2)],
    ids=repr,
)
def test_set_num_threads_refuses(value: Any, restore_threads: None) -> None:
    castlike.set_num_threads(3)
    with pytest.raises(
        CastValueError,
        match=r"^set_num_threads: expected an int of at least 1 and at most 1024, got ",
    ):
        castlike.set_num_threads(value)
    assert castlike.get_num_threads() == 3
    if _native.module() is not None:
        assert _native._POOL is not None and _native._POOL.get_limit() == 3
    # Every later cast still works (a refused value once broke them all).
    x, expected = _large_cast_bits()
    castlike.set_num_threads(1)
    assert np.array_equal(castlike.cast(x, "FLOAT8E4M3FN").view(np.uint8), expected)


@pytest.mark.parametrize("value", [1, 2, np.int64(3), _native.MAX_THREADS], ids=repr)
def test_set_num_threads_accepts(value: Any, restore_threads: None) -> None:
    castlike.set_num_threads(value)
    got = castlike.get_num_threads()
    assert type(got) is int and got == int(value)
    if _native.module() is not None:
        assert _native._POOL is not None and _native._POOL.get_limit() == int(value)
        assert _native.info()["threads"] == int(value)


def _import_with(value: str | None, native: str = "1") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CASTLIKE_NUM_THREADS"}
    if value is not None:
        env["CASTLIKE_NUM_THREADS"] = value
    env["CASTLIKE_NATIVE"] = native
    code = (
        "import castlike, castlike._native as n; "
        "print(castlike.get_num_threads(), n._POOL.get_limit() if n._POOL else None)"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=HERE
    )


@pytest.mark.parametrize(
    "value", ["abc", "0", "-2", "1025", "2.5", "1e3", " ", "99999999999999999999999"]
)
@pytest.mark.parametrize("native", ["1", "0"])
def test_invalid_environment_stops_the_import(value: str, native: str) -> None:
    proc = _import_with(value, native)
    if not value.strip():
        assert proc.returncode == 0, proc.stderr  # blank: unset
        return
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        f"castlike.errors.CastValueError: CASTLIKE_NUM_THREADS={value.strip()!r}: expected an "
        "int of at least 1 and at most 1024 (or leave it unset for the cores this process may "
        "run on)"
    )


@needs_native
def test_environment_sets_the_pool() -> None:
    assert _import_with(" 3 ").stdout.split() == ["3", "3"]
    default = min(len(os.sched_getaffinity(0)), 1024) if hasattr(os, "sched_getaffinity") else None
    got = _import_with(None).stdout.split()
    assert got[0] == got[1]
    if default is not None:
        assert got[0] == str(default)


# -- the pool (child interpreters) -----------------------------------------------------------------

_PRELUDE = f"""
import json, os, threading, time
import numpy as np
import castlike
from castlike import _native
assert os.environ.get("CASTLIKE_TEST_SANITIZED") != "1" or _native.module().sanitized

POOL = _native._POOL
# Every cast of LARGE elements wants its workers: by default the pool wakes a sleeping one only
# for work expected to be long or in a stream of casts, which depends on this machine's speed.
POOL._wake_policy(0, 0)
LARGE = {LARGE}
x = np.random.default_rng(4).standard_normal(LARGE).astype(np.float32) * 300
_native.set_num_threads(1)
EXPECTED = castlike.cast(x, "FLOAT8E4M3FN").view(np.uint8).copy()

def exact():
    return bool(np.array_equal(castlike.cast(x, "FLOAT8E4M3FN").view(np.uint8), EXPECTED))

def tasks():
    return set(os.listdir("/proc/self/task"))
"""


def _child(code: str, timeout: float = 300) -> dict[str, Any]:
    """Run ``code`` after the prelude in a fresh interpreter; its last line is JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", _PRELUDE + code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        cwd=HERE,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@needs_native
@needs_linux
def test_the_pool_persists() -> None:
    """The first large cast starts the pool's worker; ten more start no thread."""
    seen = _child(
        """
_native.set_num_threads(2)
before = POOL.workers()
ok = exact()
first = tasks()
for _ in range(10):
    ok = exact() and ok
print(json.dumps({"before": before, "after": POOL.workers(), "same_threads": tasks() == first,
                  "exact": ok}))
"""
    )
    assert seen == {"before": 0, "after": 1, "same_threads": True, "exact": True}


@needs_native
def test_a_cast_returns_with_its_helpers_counted_out() -> None:
    """When a two-thread cast returns, its helper has left the running count (and given back
    its slot): a helper preempted between its last chunk and that count once made the next
    cast see three threads running under a limit of two."""
    seen = _child(
        """
_native.set_num_threads(2)
ok, left_running = True, []
for _ in range(50):
    ok = exact() and ok
    POOL._peak_running(True)  # the peak restarts from the threads running now
    left_running.append(POOL._peak_running(False))
print(json.dumps({"exact": ok, "workers": POOL.workers(), "left_running": max(left_running)}))
"""
    )
    assert seen == {"exact": True, "workers": 1, "left_running": 0}


@needs_native
def test_the_pool_follows_set_num_threads() -> None:
    seen = _child(
        """
steps = []
for n in (4, 2, 8, 1, 2):
    _native.set_num_threads(n)
    POOL._peak_running(True)
    ok = exact()
    steps.append([n, POOL.workers(), POOL.get_limit(), POOL._peak_running(False), ok])
print(json.dumps({"steps": steps}))
"""
    )
    # A large cast wants up to 16 threads: the pool grows to the limit - 1 workers; a lower
    # limit leaves the surplus parked (no thread is started when the limit comes back up), and
    # at most `limit` threads run kernels at once.
    steps = seen["steps"]
    assert [(n, workers, limit, ok) for n, workers, limit, _, ok in steps] == [
        (4, 3, 4, True),
        (2, 3, 2, True),
        (8, 7, 8, True),
        (1, 7, 1, True),
        (2, 7, 2, True),
    ]
    assert all(peak <= n for n, _, _, peak, _ in steps), steps


_POLICY = """
_native.set_num_threads(2)
seen = {}
# Short work (its expected time is far below the bound) and no stream of casts (stream_ns 0):
# the pool starts no worker for it; the first cast of a kernel, whose speed is unknown, does.
POOL._wake_policy(10**12, 0)
seen["short"] = [exact(), POOL.workers()]
y = castlike.cast(x, "FLOAT8E5M2").view(np.uint8).copy()
seen["unknown"] = [POOL.workers()]
# The same kernel again, its speed now known: the sleeping worker is left asleep.
POOL._peak_running(True)
again = castlike.cast(x, "FLOAT8E5M2").view(np.uint8)
seen["known"] = [bool(np.array_equal(again, y)), POOL._peak_running(False)]
# A stream (each cast within a second of the last one's end): the worker is woken, then spins
# for the next cast, so that it joins one of them before long.
POOL._wake_policy(10**12, 10**9)
POOL._peak_running(True)
ok, deadline = True, time.monotonic() + 30
while POOL._peak_running(False) < 2 and time.monotonic() < deadline:
    ok = exact() and ok
seen["stream"] = [ok, POOL._peak_running(False)]
print(json.dumps(seen))
"""


@needs_native
def test_the_pool_wakes_a_worker_only_when_it_pays() -> None:
    """A sleeping worker is woken for work that is long, or of unknown length, or one of a
    stream of casts; not for one short cast (each bound set here, as the tests cannot time)."""
    seen = _child(_POLICY)
    assert seen == {
        "short": [True, 0],
        "unknown": [1],
        "known": [True, 1],
        "stream": [True, 2],
    }


@needs_native
@pytest.mark.parametrize("args", [(1,), (-1, 0), (0, -1), (1, 2, 3)], ids=repr)
def test_wake_policy_refuses(args: tuple[int, ...]) -> None:
    with pytest.raises((ValueError, TypeError)):
        _native._POOL._wake_policy(*args)


_SHARED = """
import concurrent.futures
N, RUNNER, CALLERS = {n}, "{runner}", 4
_native.set_num_threads(N)
base = len(tasks())
peak_tasks = 0
stop = threading.Event()
def sample():
    global peak_tasks
    while not stop.is_set():
        peak_tasks = max(peak_tasks, len(tasks()))
        time.sleep(0.0005)
sampler = threading.Thread(target=sample)
sampler.start()
POOL._peak_running(True)
results = []
if RUNNER == "threads":
    def work():
        for _ in range(3):
            results.append(exact())
    callers = [threading.Thread(target=work) for _ in range(CALLERS)]
    for t in callers: t.start()
    for t in callers: t.join()
elif RUNNER == "executor":
    with concurrent.futures.ThreadPoolExecutor(CALLERS) as pool:
        results = list(pool.map(lambda _: exact(), range(3 * CALLERS)))
else:
    import dask, dask.array as da
    lazy = castlike.cast(da.from_array(np.tile(x, CALLERS), chunks=LARGE), "FLOAT8E4M3FN")
    for _ in range(3):
        bits = lazy.compute(scheduler="threads", num_workers=CALLERS).view(np.uint8)
        results.append(bool(np.array_equal(bits, np.tile(EXPECTED, CALLERS))))
stop.set()
sampler.join()
print(json.dumps({{"peak_running": POOL._peak_running(False), "workers": POOL.workers(),
                   "extra_tasks": peak_tasks - base, "exact": all(results) and len(results) > 0}}))
"""


@needs_native
@needs_linux
@pytest.mark.parametrize("runner", ["threads", "executor", "dask"])
@pytest.mark.parametrize("limit", [1, 2, 4])
def test_callers_share_the_limit(runner: str, limit: int) -> None:
    """4 callers at once, each casting 2**22 elements: at most ``limit`` threads run kernels,
    and the process holds its callers, the sampler and ``limit - 1`` workers, no more."""
    if runner == "dask":
        pytest.importorskip("dask.array", reason="the Dask runner needs dask")
    seen = _child(_SHARED.format(n=limit, runner=runner))
    assert seen["exact"] is True
    assert seen["peak_running"] <= limit
    assert seen["workers"] == limit - 1
    # The callers (4 threads; Dask's pool at most 4 more) and the sampler.
    callers = 4 + 1
    assert seen["extra_tasks"] <= callers + (limit - 1), seen


_FORK = """
import signal
_native.set_num_threads(2)
assert exact() and POOL.workers() == 1
stop = threading.Event()
def busy():
    while not stop.is_set():
        exact()
casting = threading.Thread(target=busy)
casting.start()
children = []
for _ in range(8):
    time.sleep(0.01)
    pid = os.fork()
    if pid == 0:  # the child: a fresh pool, built on first use
        signal.alarm(60)  # a deadlock ends the child instead of hanging the test
        fresh = POOL.workers() == 0 and POOL.get_limit() == 2
        POOL._wake_policy(0, 0)  # the child's new pool has the default policy
        ok = exact()
        os._exit(0 if fresh and ok and POOL.workers() == 1 else 1)
    children.append(pid)
statuses = [os.waitpid(pid, 0)[1] for pid in children]
stop.set()
casting.join()
print(json.dumps({"statuses": statuses, "parent_exact": exact(), "parent_workers": POOL.workers()}))
"""


@needs_native
@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_fork_rebuilds_the_pool() -> None:
    """Children forked while a parent thread casts on the pool cast on a pool of their own."""
    seen = _child(_FORK)
    assert seen == {"statuses": [0] * 8, "parent_exact": True, "parent_workers": 1}
