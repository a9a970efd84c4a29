"""The repeat-call path of :func:`castlike.cast` for NumPy arrays.

A cast from Python costs more in resolving its arguments (the type, the opset, the options,
the adapter, the plan, the kernel) than a small array costs to convert.  Those steps depend
only on the input's dtype and the arguments, so the first call with a combination does them
all, through the full validation, and remembers the kernel; later calls with the same
combination look it up by one dict access and run it.  Only combinations that the full path
accepted are remembered, so a bad argument always meets the full validation and its error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = ["cached_cast", "clear", "paused", "remember"]

#: (dtype, target argument and its type, options and their types) -> the cast to run.
_CASTS: dict[tuple[Any, ...], Callable[[np.ndarray], np.ndarray]] = {}
#: Options of these exact types only: 1 == True and 19.0 == 19, but only True and 19 are valid.
_SIMPLE = (str, int, bool, type(None))
#: How many :func:`paused` blocks are open: inside one, every call takes the full path.
_PAUSED = 0


def _key(x: Any, to: Any, options: tuple[Any, ...]) -> tuple[Any, ...] | None:
    if type(x) is not np.ndarray:  # subclasses (masked arrays ...) take the full path
        return None
    if type(to) not in _SIMPLE and not isinstance(to, np.dtype):
        return None
    if any(type(o) not in _SIMPLE for o in options):
        return None
    return (x.dtype, type(to), to, *map(type, options), *options)


def cached_cast(x: Any, to: Any, options: tuple[Any, ...]) -> np.ndarray | None:
    """The result of a cast seen before with the same dtype and arguments, or None."""
    key = _key(x, to, options) if not _PAUSED else None
    if key is None:
        return None
    found = _CASTS.get(key)
    if found is None:
        return None
    return found(x)


def remember(x: Any, to: Any, options: tuple[Any, ...], run: Callable[[np.ndarray], Any]) -> None:
    """Remember how the full path cast ``x`` (``run`` takes an array of ``x``'s dtype and casts
    it as the full path did: the adapter's kernel, not necessarily its engine).  Code that
    replaces an engine or a rule runs inside :func:`paused`
    (:func:`castlike.testing.fresh_caches` does)."""
    key = _key(x, to, options) if not _PAUSED else None
    if key is not None and len(_CASTS) < 4096:
        _CASTS[key] = run


def clear() -> None:
    """Forget every remembered cast (after the spec's rules or the kernels changed)."""
    _CASTS.clear()


@contextmanager
def paused() -> Iterator[None]:
    """Run a block in which every cast takes the full path and nothing is remembered."""
    global _PAUSED
    _PAUSED += 1
    try:
        yield
    finally:
        _PAUSED -= 1
