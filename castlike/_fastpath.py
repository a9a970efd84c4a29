"""The repeat-call path of :func:`castlike.cast` for NumPy arrays and PyTorch CPU tensors.

A cast from Python costs more in resolving its arguments (the type, the opset, the options,
the adapter, the plan, the kernel) than a small array costs to convert.  Those steps depend
only on the input's dtype (and a CPU tensor's layout) and the arguments, so the first
call with a combination does them all, through the full validation, and remembers the kernel;
later calls with the same combination look it up by one dict access and run it.  Only
combinations that the full path accepted are remembered, so a bad argument always meets the
full validation and its error.  A remembered function may decline an input (it returns None:
a case its shortcut does not cover), which then takes the full path.

Under ``torch.compile`` nothing is looked up or remembered: Dynamo would guard on the
dictionary's contents, and the traced graph must hold the cast itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from .spec.types import OnnxType

__all__ = [
    "cached_cast",
    "cached_default_cast",
    "clear",
    "like_target",
    "paused",
    "remember",
    "set_default_options",
    "take_tensors",
]

#: (dtype, target argument and its type, options and their types) -> the cast to run (which
#: returns None for an input it declines).
_CASTS: dict[tuple[Any, ...], Callable[[Any], Any]] = {}
#: The shortcut for the commonest call, a NumPy array cast with every option at its default:
#: (dtype, type of the target, target) -> the cast, as in _CASTS.  Its key is cheap where it
#: matters most: after more memory than the caches hold was touched, the interpreter's own data
#: is cold, and cast() took 14-18 µs above the kernel's repeat() with _CASTS's key of 15 items
#: (10**6 FLOATs into INT16, 0.17-0.18 ms, one thread, Zen 5; ``astype`` took what repeat()
#: took), 8-10 µs with this one (docs/performance.rst).
_DEFAULT_CASTS: dict[tuple[Any, Any, Any], Callable[[Any], Any]] = {}
#: The default options, as the frontend passes them (set_default_options), and the tail of the
#: _CASTS key of a call that left them all so: their types, then them.
_DEFAULT_OPTIONS: tuple[Any, ...] = ()
_DEFAULT_TAIL: tuple[Any, ...] = ()
#: The most casts remembered at once; beyond it the oldest is forgotten (a long-running process
#: that meets ever new combinations keeps the path for the recent ones, in bounded memory).
_LIMIT = 4096
#: Options of these exact types only: 1 == True and 19.0 == 19, but only True and 19 are valid.
_SIMPLE = (str, int, bool, type(None))


class Like(NamedTuple):
    """CastLike's ``like`` in a key (:func:`like_target`): its exact type, and its dtype (an
    array) or itself (a target :func:`castlike.cast` takes).  Its own type in the key keeps
    CastLike's casts apart from Cast's, whose opsets differ."""

    kind: type
    target: Any


#: The exact types a target (``to``) may have to be remembered, besides NumPy dtypes: the
#: options' types, an :class:`OnnxType` member, and a class whose metaclass is ``type`` (NumPy's
#: and ml_dtypes' scalar types, ``np.float32``): such a class hashes and compares by identity, so
#: a hostile one cannot run code in the lookup.  The torch backend adds ``torch.dtype``
#: (:func:`take_tensors`).  A :class:`Like` is a key's target only where CastLike made it.
_TARGETS: set[type] = {*_SIMPLE, OnnxType, type}
#: How many :func:`paused` blocks are open: inside one, every call takes the full path.
_PAUSED = 0


#: ``torch.Tensor`` and ``torch.compiler.is_compiling``, set by the torch backend when it loads
#: (:func:`take_tensors`): until then no tensor can have been cast, so none is remembered.
_TENSOR: type | None = None
_COMPILING: Callable[[], bool] = bool
#: Under torch.compile, the torch backend's cast of a tensor by one opaque native operator,
#: decided outside the trace (or None: the full path).
_COMPILED: Callable[[Any, Any, tuple[Any, ...]], Any] | None = None


def take_tensors(
    tensor_type: type,
    is_compiling: Callable[[], bool],
    compiled_cast: Callable[[Any, Any, tuple[Any, ...]], Any] | None = None,
    dtype_type: type | None = None,
) -> None:
    """Let the repeat path take tensors of exactly ``tensor_type`` (the torch backend calls
    this on import), except while ``is_compiling()``; then ``compiled_cast(x, to, options)``
    may cast them instead (None where it declines).  Targets of exactly ``dtype_type`` (the
    library's dtype) are remembered too."""
    global _TENSOR, _COMPILING, _COMPILED
    _TENSOR, _COMPILING, _COMPILED = tensor_type, is_compiling, compiled_cast
    if dtype_type is not None:
        _TARGETS.add(dtype_type)


def _first_tensor(x: Any, to: Any, options: tuple[Any, ...]) -> Any:
    """A tensor met before the torch backend loaded: load it (its import calls
    :func:`take_tensors`), and under torch.compile let it cast ``x`` as it casts every later
    tensor.  Read through the module the import returns: reading this module's globals again
    after the import left Dynamo on the full path (as if it kept the values it read before)."""
    from .backends import torch as backend

    if type(x) is backend.torch.Tensor and backend.torch.compiler.is_compiling():
        return backend._compiled_cast(x, to, options)
    return None


def like_target(like: Any) -> Like | None:
    """CastLike's ``like`` as the ``to`` of a key, or None (the full path every time): a NumPy
    array or a tensor by its exact type and dtype (all of it that CastLike reads, but for a
    string array, whose casts are never remembered), a target of a type :func:`cast` remembers
    by itself."""
    kind = type(like)
    if kind is np.ndarray or kind is _TENSOR:
        return Like(kind, like.dtype)
    if kind in _TARGETS or isinstance(like, np.dtype):
        return Like(kind, like)
    return None


def _key(x: Any, to: Any, options: tuple[Any, ...], like: bool = False) -> tuple[Any, ...] | None:
    """The key of a cast that can be remembered, or None.  Only exact types are taken (an
    argument of any other type must meet the full validation; a hostile one is never hashed or
    compared).  Its types come before the values they type: tuples compare element by
    element, so a dtype never meets a str ``to`` (NumPy would compare them by converting), nor
    True 1 (equal, and of equal hashes)."""
    kind = type(x)  # subclasses (masked arrays, parameters ...) take the full path
    if kind is np.ndarray:
        form: Any = x.dtype
    elif kind is _TENSOR:
        if _COMPILING() or not x.is_cpu:  # the kernels run on host memory only
            return None
        form = (x.dtype, x.layout)
    else:
        return None
    if like:  # CastLike's own Like; a Like passed to cast() as its target is no key
        if type(to) is not Like:
            return None
    elif type(to) not in _TARGETS and not isinstance(to, np.dtype):
        return None
    types = tuple(map(type, options))
    for option_type in types:  # a loop: a generator's set-up costs more than these few tests
        if option_type not in _SIMPLE:
            return None
    return (form, type(to), to, *types, *options)


def set_default_options(options: tuple[Any, ...]) -> None:
    """Name the options of a call that leaves every one at its default (the frontend does, once):
    their casts of NumPy arrays are remembered for :func:`cached_default_cast` too."""
    global _DEFAULT_OPTIONS, _DEFAULT_TAIL
    _DEFAULT_OPTIONS = options
    _DEFAULT_TAIL = (*map(type, options), *options)


def cached_default_cast(x: Any, to: Any) -> Any:
    """:func:`cached_cast` for a call whose caller found every option at its default (by
    identity, so of its exact type): a NumPy array and a target of a type that may be a key take
    the shortcut's key; anything else, or a cast not yet remembered, :func:`cached_cast`'s."""
    if type(x) is np.ndarray and not _PAUSED and (type(to) in _TARGETS or isinstance(to, np.dtype)):
        found = _DEFAULT_CASTS.get((x.dtype, type(to), to))
        if found is not None:
            return found(x)
    return cached_cast(x, to, _DEFAULT_OPTIONS)


def cached_cast(x: Any, to: Any, options: tuple[Any, ...], like: bool = False) -> Any:
    """The result of a cast seen before with the same dtype and arguments, or None.  While
    torch.compile traces, a tensor's cast that the torch backend decides outside the trace."""
    # In this order: _COMPILED is read only once _TENSOR matched (Dynamo cannot guard on a
    # global it saw as None and finds a function once tracing ends).  A tensor met before the
    # torch backend loaded (_TENSOR None) goes to _first_tensor, which loads it.
    if type(x) is _TENSOR and _COMPILING() and _COMPILED is not None:
        return _COMPILED(x, to, options)
    key = _key(x, to, options, like) if not _PAUSED else None
    if key is None:
        if _TENSOR is None and type(x).__module__ == "torch":
            return _first_tensor(x, to, options)
        return None
    found = _CASTS.get(key)
    return None if found is None else found(x)


def remember(
    x: Any, to: Any, options: tuple[Any, ...], make_run: Callable[[], Callable[[Any], Any] | None]
) -> None:
    """Remember how the full path cast ``x``.  ``make_run()`` returns a function that takes an
    array like ``x`` and casts it as the full path did (the adapter's kernel, not necessarily
    its engine), or None where there is none; it is called only where ``x`` can be remembered
    (never while torch.compile traces).  Code that replaces an engine or a rule runs inside
    :func:`paused` (:func:`castlike.testing.fresh_caches` does)."""
    # Only what the full path accepted gets here: a Like is CastLike's (cast() refuses one).
    key = _key(x, to, options, type(to) is Like) if not _PAUSED else None
    if key is None:
        return
    run = make_run()
    if run is not None:
        if len(_CASTS) >= _LIMIT:
            del _CASTS[next(iter(_CASTS))]  # dicts keep insertion order: the oldest
        _CASTS[key] = run
        if type(x) is np.ndarray and type(to) is not Like and key[3:] == _DEFAULT_TAIL:
            if len(_DEFAULT_CASTS) >= _LIMIT:
                del _DEFAULT_CASTS[next(iter(_DEFAULT_CASTS))]
            _DEFAULT_CASTS[key[:3]] = run


def clear() -> None:
    """Forget every remembered cast (after the spec's rules or the kernels changed)."""
    _CASTS.clear()
    _DEFAULT_CASTS.clear()


@contextmanager
def paused() -> Iterator[None]:
    """Run a block in which every cast takes the full path and nothing is remembered."""
    global _PAUSED
    _PAUSED += 1
    try:
        yield
    finally:
        _PAUSED -= 1
