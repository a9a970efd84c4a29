"""Backend registry: pick the adapter for an Array-API namespace, lazily.

As in einops, a library is only ever touched if the caller already imported it: the adapter
module for torch is imported when a torch tensor arrives, never before, and castlike itself
never imports torch, jax or dask.

The backends are, in the order they are asked: the built-in ones of
:data:`~castlike.backends._registry.BUILTIN_BACKENDS`, then those added by :func:`register`,
then those of the ``castlike.backends`` entry points (read only when none of the others
matches, so that they cost nothing otherwise).  A namespace none of them claims but that
array-api-compat knows is served by the generic backend, :mod:`castlike.backends.array_api`.

The entry points are read once per process, under a lock: a thread that needs them while
another reads them waits for the reading to end, then dispatches with every backend it
registered (it never falls through to the generic backend meanwhile).  Each entry point loads
on its own: one that does not load (or gives no :class:`BackendInfo`, or a name already taken)
is not retried, and does not keep the others from registering.  Its error is kept and raised
again, the same each time, by every call whose answer it could change: a cast of an array no
backend claims (the broken plugin may have been its backend), :func:`backend_info` of an
unknown name (its message says so too) and :func:`backends`.  Arrays of the other backends
are cast as usual.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable
from typing import Any

import array_api_compat as aac

from .._adapter import Adapter
from ..errors import BackendTypeError, CastValueError
from ..spec.types import OnnxType
from ._registry import BUILTIN_BACKENDS, ENTRY_POINT_GROUP, BackendInfo

__all__ = [
    "Adapter",
    "BackendInfo",
    "adapter_for",
    "adapter_named",
    "backend_info",
    "backends",
    "loaded_adapters",
    "moves_strings",
    "onnx_type_of_dtype",
    "packed_type_of_dtype",
    "register",
]

#: Every registered backend by name, in the order they are asked, with its namespace test.
_BACKENDS: dict[str, tuple[BackendInfo, Callable[[Any], bool]]] = {}
#: The same as a tuple, which torch.compile reads as a constant (adapter_for is traced).
_DISPATCH: tuple[tuple[BackendInfo, Callable[[Any], bool]], ...] = ()
#: Set once every entry point was tried (after the registrations it made), under _LOCK.
_ENTRY_POINTS_READ = False
#: Why each entry point that was tried did not register (its message and the exception).
_ENTRY_POINT_ERRORS: list[tuple[str, BaseException | None]] = []
#: Whether this thread (the one holding _LOCK) is reading the entry points.
_READING = False
#: Held while the registry changes: register() and the reading of the entry points (which
#: calls register(), hence reentrant).
_LOCK = threading.RLock()

#: Adapters already imported, by name.  A plain dict rather than ``lru_cache``, because
#: torch.compile traces adapter_for/adapter_named: Dynamo ignores ``lru_cache`` (and then
#: meets importlib, which it refuses to trace) but reads a dict.
_ADAPTERS: dict[str, Adapter] = {}


def _namespace_test(info: BackendInfo) -> Callable[[Any], bool]:
    test = info.is_namespace
    if isinstance(test, str):
        found = getattr(aac, test, None)
        if not callable(found):
            raise CastValueError(
                f"backend {info.name!r}: array-api-compat has no namespace test {test!r}; pass "
                "the name of one of its is_*_namespace functions, or a function f(xp) -> bool"
            )
        return found
    if not callable(test):
        raise CastValueError(
            f"backend {info.name!r}: is_namespace must be a function f(xp) -> bool or the name "
            f"of one of array-api-compat's, not {type(test).__name__}"
        )
    return test


def register(info: BackendInfo) -> None:
    """Add a backend: arrays whose namespace ``info.is_namespace`` accepts are cast by the
    adapter at ``info.adapter``, which is imported on the first such array.

    Parameters
    ----------
    info : BackendInfo
        The backend's name, library module, namespace test, adapter path and pip extra.

    Raises
    ------
    CastValueError
        ``info`` is not a :class:`BackendInfo`, one of its fields is not of its type, or a
        backend of the same name is already registered.

    Examples
    --------
    A backend of an installed library, registered again, is an error:

    >>> from castlike.backends import BackendInfo, register
    >>> register(BackendInfo("numpy", "numpy", "is_numpy_namespace", "castlike.backends.numpy"))
    Traceback (most recent call last):
    ...
    castlike.errors.CastValueError: a backend named 'numpy' is already registered (adapter castlike.backends.numpy); pick another name
    """  # noqa: E501
    global _DISPATCH
    if not isinstance(info, BackendInfo):
        raise CastValueError(
            f"register() takes a castlike.backends.BackendInfo, not {type(info).__name__}"
        )
    for field in ("name", "module", "adapter"):
        value = getattr(info, field)
        if not isinstance(value, str) or not value.strip():
            raise CastValueError(f"BackendInfo.{field} must be a non-empty str, got {value!r}")
    if info.extra is not None and not isinstance(info.extra, str):
        raise CastValueError(f"BackendInfo.extra must be a str or None, got {info.extra!r}")
    with _LOCK:
        existing = _BACKENDS.get(info.name)
        if existing is not None:
            raise CastValueError(
                f"a backend named {info.name!r} is already registered (adapter "
                f"{existing[0].adapter}); pick another name"
            )
        _BACKENDS[info.name] = (info, _namespace_test(info))
        _DISPATCH = tuple(_BACKENDS.values())


for _builtin in BUILTIN_BACKENDS:
    register(_builtin)


def _read_entry_points() -> bool:
    """Register the backends of the ``castlike.backends`` entry points, once per process
    (each loads to a :class:`BackendInfo`); see the module's docstring for the errors.

    Returns whether they are read: False only inside the reading, further up this thread's
    stack (a plugin whose import casts an array), which then sees the backends registered so
    far.
    """
    global _ENTRY_POINTS_READ, _READING
    if _ENTRY_POINTS_READ:
        return True
    with _LOCK:
        if _ENTRY_POINTS_READ:  # read by another thread while this one waited
            return True
        if _READING:  # by this thread: only the lock's holder gets here
            return False
        _READING = True
        try:
            _register_entry_points()
        finally:
            _READING = False
        # Only now: a thread that sees the flag without the lock finds every registration.
        _ENTRY_POINTS_READ = True
    return True


def _register_entry_points() -> None:
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        where = f"the entry point {point.name} = {point.value} (group {ENTRY_POINT_GROUP})"
        try:
            info = point.load()
        except Exception as exc:  # a broken plugin: say which, whatever it raised
            _ENTRY_POINT_ERRORS.append((f"{where} does not load: {type(exc).__name__}: {exc}", exc))
            continue
        if not isinstance(info, BackendInfo):
            message = f"{where} gives a {type(info).__name__}, not a castlike.backends.BackendInfo"
            _ENTRY_POINT_ERRORS.append((message, None))
            continue
        if info.name in _BACKENDS and _BACKENDS[info.name][0] == info:
            continue  # registered by a register() call too
        try:
            register(info)
        except CastValueError as exc:
            _ENTRY_POINT_ERRORS.append((f"{where}: {exc}", exc))


def _raise_entry_point_errors() -> None:
    """Raise, as a CastValueError, why the entry points that did not register did not."""
    if _ENTRY_POINT_ERRORS:
        cause = _ENTRY_POINT_ERRORS[0][1]
        raise CastValueError("; ".join(message for message, _ in _ENTRY_POINT_ERRORS)) from cause


def backends() -> list[BackendInfo]:
    """Every backend castlike knows: built-in, registered, and of the entry points.

    Raises
    ------
    CastValueError
        An entry point of the group ``castlike.backends`` does not give a backend.
    """
    _read_entry_points()
    _raise_entry_point_errors()
    return [info for info, _test in _DISPATCH]


def backend_info(name: str) -> BackendInfo:
    """The backend named ``name``; a BackendTypeError listing the known ones otherwise."""
    found = _BACKENDS.get(name)
    if found is None:
        _read_entry_points()
        found = _BACKENDS.get(name)
    if found is None:
        # The name may be that of a plugin that did not load: say so too.
        broken = "".join(f"; {message}" for message, _ in _ENTRY_POINT_ERRORS)
        raise BackendTypeError(
            f"castlike has no backend named {name!r}; known: {', '.join(_BACKENDS)}{broken}"
        )
    return found[0]


def adapter_named(name: str) -> Adapter:
    """The adapter of one backend by its name ("numpy", "torch", "array-api-strict", ...)."""
    adapter = _ADAPTERS.get(name)
    if adapter is None:
        adapter = _ADAPTERS[name] = _import_adapter(backend_info(name))
    return adapter


def _import_adapter(info: BackendInfo) -> Adapter:
    # Static import statements, which Dynamo executes (it refuses importlib), so that a first
    # cast inside torch.compile(fullgraph=True) works too.
    if info.adapter == "castlike.backends.numpy":
        from .numpy import ADAPTER as numpy_adapter

        return numpy_adapter
    if info.adapter == "castlike.backends.torch":
        from .torch import ADAPTER as torch_adapter

        return torch_adapter
    module_name, _, attribute = info.adapter.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise BackendTypeError(
                f"the {info.name} backend's adapter module {module_name} is not installed"
            ) from None
        raise
    found = getattr(module, attribute or "ADAPTER", None)
    if found is not None and not isinstance(found, Adapter) and callable(found):
        found = found()
    if not isinstance(found, Adapter):
        raise CastValueError(
            f"the {info.name} backend's adapter {info.adapter} is not a castlike Adapter "
            f"(nor a function returning one): it is {type(found).__name__}"
        )
    return found


def adapter_for(xp: Any) -> Adapter:
    """The adapter for the Array-API namespace ``xp``."""
    for info, is_namespace in _DISPATCH:
        if is_namespace(xp):
            return adapter_named(info.name)
    if not _ENTRY_POINTS_READ and _read_entry_points():
        return adapter_for(xp)
    _raise_entry_point_errors()  # the plugin that did not load may be this array's
    from .array_api import adapter_for_namespace

    return adapter_for_namespace(xp)


def loaded_adapters() -> list[Adapter]:
    """Adapters of the libraries the caller has imported (numpy always)."""
    out = []
    for info, _is_namespace in _DISPATCH:
        if info.module in sys.modules:
            try:
                out.append(adapter_named(info.name))
            except BackendTypeError:
                continue
    generic = sys.modules.get("castlike.backends.array_api")
    if generic is not None:
        out += [a for a in generic.generic_adapters() if a not in out]
    return out


def moves_strings(adapter: Adapter) -> bool:
    """Whether casts from and to STRING may move numbers between ``adapter``'s library and
    NumPy, where strings live (R9): :attr:`Adapter.moves_strings_through_numpy`."""
    return adapter.moves_strings_through_numpy


def _own_adapter(dtype: Any) -> Adapter | None:
    """The adapter of the library that defines ``dtype``'s class, where that library is
    imported and castlike has a built-in adapter for it; None otherwise.

    A dtype is asked of its own library first, and only that one is loaded for it: another
    library's parser may raise on it, and under torch.compile loading another adapter (an
    import, of JAX's adapter when JAX is imported, say) is a call Dynamo cannot trace.
    """
    owner = type(dtype).__module__.partition(".")[0]
    for info, _is_namespace in _DISPATCH:
        if info.name.replace("-", "_") == owner and info.module in sys.modules:
            try:
                return adapter_named(info.name)
            except BackendTypeError:
                return None
    return None


def onnx_type_of_dtype(dtype: Any) -> OnnxType | None:
    """The ONNX type of a dtype object of any imported library, or None."""
    own = _own_adapter(dtype)
    if own is not None:
        found = own.onnx_type_of(dtype)
        if found is not None:
            return found
    for adapter in loaded_adapters():
        found = adapter.onnx_type_of(dtype)
        if found is not None:
            return found
    return None


def packed_type_of_dtype(dtype: Any) -> OnnxType | None:
    """The sub-byte type a packed dtype of an imported library holds (torch's
    ``float4_e2m1fn_x2``), or None for every other object.  A library's packed dtypes are its
    own: where the dtype's library has an adapter, only that one is asked."""
    own = _own_adapter(dtype)
    if own is not None:
        return own.packed_type_of(dtype)
    for adapter in loaded_adapters():
        found = adapter.packed_type_of(dtype)
        if found is not None:
            return found
    return None
