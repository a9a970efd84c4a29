"""castlike's native kernels: the NumPy backend's fast path.

The kernels are compiled once per CPU level (``_baseline``; on x86-64 also ``_avx2`` for
x86-64-v3 and ``_avx512`` for x86-64-v4) from one C++ source; this module imports the best
level the CPU supports.  The pure-NumPy engine stays the reference and the fallback.

Environment
-----------
``CASTLIKE_NATIVE=0``
    Never use the kernels (the pure-NumPy engine casts everything).
``CASTLIKE_CPU=baseline|avx2|avx512``
    Use this CPU level (at most the best the CPU supports) instead of the best one.
``CASTLIKE_NUM_THREADS=N``
    Threads for large arrays (default: the cores this process may run on); see
    :func:`set_num_threads`.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

__all__ = [
    "LEVELS",
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
            raise ValueError(f"CASTLIKE_CPU={wanted!r}: expected one of {', '.join(LEVELS)}")
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


def _default_threads() -> int:
    env = os.environ.get("CASTLIKE_NUM_THREADS", "").strip()
    if env:
        value = int(env)
        if value < 1:
            raise ValueError(f"CASTLIKE_NUM_THREADS must be at least 1, got {env!r}")
        return value
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_THREADS = _default_threads()


def get_num_threads() -> int:
    """Threads the native kernels split a large array across."""
    return _THREADS


def set_num_threads(n: int) -> None:
    """Set the threads the native kernels use for large arrays (small arrays use one).

    Parameters
    ----------
    n : int
        At least 1.  The default is ``CASTLIKE_NUM_THREADS`` or the cores this process may use.
    """
    global _THREADS
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of threads must be an int of at least 1, got {n!r}")
    _THREADS = n


def info() -> dict[str, Any]:
    """Which cast path is in use, the CPU level, the CPU's features and the thread count."""
    base = _base_module()
    return {
        "path": "native" if _MODULE is not None else "pure NumPy",
        "level": _MODULE.variant if _MODULE is not None else None,
        "reason": _REASON,
        "levels_available": available_levels(),
        "cpu_features": base.cpu_features() if base is not None else {},
        "threads": _THREADS,
    }
