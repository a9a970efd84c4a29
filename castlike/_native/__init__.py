"""castlike's native kernels: the NumPy backend's fast path.

The kernels are compiled once per CPU level (``_baseline``; on x86-64 also ``_avx2`` for
x86-64-v3 and ``_avx512`` for x86-64-v4) from one C++ source; this module imports the best
level the CPU supports.  The AVX-512 kernels also use AVX512-BF16's FLOAT -> BFLOAT16
conversion where the CPU has it (x86-64-v4 does not include it), chosen as they run.  The
pure-NumPy engine stays the reference and the fallback.

Environment
-----------
``CASTLIKE_NATIVE=0``
    Never use the kernels (the pure-NumPy engine casts everything).
``CASTLIKE_CPU=baseline|avx2|avx512``
    Use this CPU level (at most the best the CPU supports) instead of the best one.
``CASTLIKE_NUM_THREADS=N``
    The most threads the kernels run on at once, 1 to :data:`MAX_THREADS` (default: the cores
    this process may run on); see :func:`set_num_threads`.  Any other value stops the import
    with a :class:`~castlike.CastValueError` that says so.
"""

from __future__ import annotations

import contextlib
import importlib
import operator
import os
from types import ModuleType
from typing import Any

from ..errors import CastValueError

__all__ = [
    "LEVELS",
    "MAX_THREADS",
    "available_levels",
    "get_num_threads",
    "info",
    "module",
    "set_num_threads",
]

#: CPU levels from the most portable to the fastest.
LEVELS = ("baseline", "avx2", "avx512")
_NEEDS = {"baseline": None, "avx2": "x86-64-v3", "avx512": "x86-64-v4"}


def _import(level: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"castlike._native._{level}")
    except ImportError:
        return None


def _base_module() -> ModuleType | None:
    return _import("baseline")


def available_levels() -> list[str]:
    """The CPU levels that were built and that this CPU can run, most portable first."""
    base = _base_module()
    if base is None:
        return []
    features = base.cpu_features()
    out = []
    for level in LEVELS:
        need = _NEEDS[level]
        if (need is None or features.get(need)) and (
            level == "baseline" or _import(level) is not None
        ):
            out.append(level)
    return out


def _select() -> tuple[ModuleType | None, str]:
    """The kernel module to use and why (for :func:`info`)."""
    if os.environ.get("CASTLIKE_NATIVE", "1").strip() == "0":
        return None, "disabled by CASTLIKE_NATIVE=0"
    levels = available_levels()
    if not levels:
        return None, "the extension is not built (pure NumPy engine)"
    wanted = os.environ.get("CASTLIKE_CPU", "").strip().lower()
    if wanted:
        if wanted not in LEVELS:
            raise CastValueError(f"CASTLIKE_CPU={wanted!r}: expected one of {', '.join(LEVELS)}")
        usable = [lv for lv in levels if LEVELS.index(lv) <= LEVELS.index(wanted)]
        level = usable[-1]
        reason = f"CASTLIKE_CPU={wanted}" + ("" if level == wanted else " (not on this CPU)")
    else:
        level, reason = levels[-1], "the best level this CPU supports"
    found = _import(level)
    assert found is not None
    return found, reason


_MODULE, _REASON = _select()


def module() -> ModuleType | None:
    """The kernel module in use, or None when the pure engine casts everything."""
    return _MODULE


def advise_huge_pages(out: Any) -> None:
    """Ask for huge pages behind a new output that a torch path has just allocated for a
    kernel to fill (any writable buffer: the NumPy view of the tensor), as NumPy does for its
    own new arrays of 4 MiB or more.  Linux only; advice, never a change of the bits.  NumPy
    outputs need no call: ``numpy.empty`` asks by itself."""
    if _MODULE is not None:
        _MODULE.advise_huge_pages(out)


#: The most threads :func:`set_num_threads` and ``CASTLIKE_NUM_THREADS`` accept: far beyond
#: what a memory-bound cast gains from, low enough that a mistaken value cannot ask for
#: millions of threads.
MAX_THREADS = 1024

_THREADS_ALLOWED = f"an int of at least 1 and at most {MAX_THREADS}"


def _threads_from_environment() -> int:
    """``CASTLIKE_NUM_THREADS`` if set, else the cores this process may run on (at most
    :data:`MAX_THREADS`)."""
    env = os.environ.get("CASTLIKE_NUM_THREADS", "").strip()
    if env:
        try:
            value = int(env, 10)
        except ValueError:
            value = 0
        if not 1 <= value <= MAX_THREADS:
            raise CastValueError(
                f"CASTLIKE_NUM_THREADS={env!r}: expected {_THREADS_ALLOWED} "
                "(or leave it unset for the cores this process may run on)"
            )
        return value
    return max(1, min(usable_cores(), MAX_THREADS))


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the platform has one."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _pool() -> ModuleType | None:
    """The native thread pool (castlike._native._threads), if the extension is built."""
    try:
        return importlib.import_module("castlike._native._threads")
    except ImportError:
        return None


_THREADS = _threads_from_environment()
#: No native code at all where the kernels are not used (CASTLIKE_NATIVE=0 or not built).
_POOL = _pool() if _MODULE is not None else None
if _POOL is not None:
    _POOL.set_limit(_THREADS)


def get_num_threads() -> int:
    """The most threads the native kernels run on at once (see :func:`set_num_threads`)."""
    return _THREADS


def set_num_threads(n: int) -> None:
    """Set the most threads castlike's native kernels run on at once, in the whole process.

    A large array (2**20 elements or more) is split across up to ``n`` threads: the calling
    thread and workers of one pool that the process keeps (started when first needed).  A
    worker that sleeps is woken only for a cast expected to take 1 ms or more on one thread,
    or one that follows the last cast within 1 ms (a worker that has just helped stays awake,
    spinning, that long): a shorter cast after a pause runs on the calling thread, since
    waking a thread can cost more than it gains (the performance page has the measurements).
    Casts made at the same time from several threads (Dask's threaded scheduler, a
    ``ThreadPoolExecutor``) share those ``n`` threads: a cast waits, with the GIL released,
    while all ``n`` are busy.  Small arrays run on the calling thread.  A lower ``n`` leaves
    the workers started before parked (waiting, running nothing), ready when ``n`` is raised
    again: moving it down and back up starts no thread.

    Parameters
    ----------
    n : int
        1 to :data:`MAX_THREADS` (an ``int``, or an integer that ``operator.index`` takes, such
        as ``numpy.int64``; not a ``bool``).  The default is ``CASTLIKE_NUM_THREADS`` or the
        cores this process may run on.

    Raises
    ------
    CastValueError
        If ``n`` is not such an integer.
    """
    global _THREADS
    value = None
    if not isinstance(n, bool):
        with contextlib.suppress(TypeError):  # not an integer: refused below
            value = operator.index(n)
    if value is None or not 1 <= value <= MAX_THREADS:
        raise CastValueError(f"set_num_threads: expected {_THREADS_ALLOWED}, got {n!r}")
    if _POOL is not None:
        _POOL.set_limit(value)
    _THREADS = value


def info() -> dict[str, Any]:
    """Which cast path is in use, the CPU level (and the instructions beyond it that the kernels
    use on this CPU), the CPU's features and the thread count."""
    base = _base_module()
    extras = []
    if _MODULE is not None and _MODULE._bfloat16_instructions():
        extras.append("avx512bf16")
    return {
        "path": "native" if _MODULE is not None else "pure NumPy",
        "level": _MODULE.variant if _MODULE is not None else None,
        "extra_instructions": extras,
        "reason": _REASON,
        "levels_available": available_levels(),
        "cpu_features": base.cpu_features() if base is not None else {},
        "threads": _THREADS,
    }
