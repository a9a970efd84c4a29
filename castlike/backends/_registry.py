"""The one list of castlike's built-in backends, as plain data.

Everything that names backends reads this list: the dispatch of :mod:`castlike.backends`,
``castlike parity`` and ``castlike conformance``, the test suite's ``backend`` fixture
(``tests/conftest.py``) and the nox sessions (``noxfile.py``, which loads this file by its
path, without importing castlike: so this module imports nothing beyond the standard library).

A third-party backend is added at run time with :func:`castlike.backends.register` or through
an entry point of the group :data:`ENTRY_POINT_GROUP`; see the docs' backends page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["BUILTIN_BACKENDS", "ENTRY_POINT_GROUP", "BackendInfo"]

#: The entry-point group a third-party distribution declares its backends in.
ENTRY_POINT_GROUP = "castlike.backends"


@dataclass(frozen=True)
class BackendInfo:
    """One backend: how castlike recognises its arrays and where its adapter lives.

    Parameters
    ----------
    name : str
        The backend's name, as ``castlike parity --backend NAME`` and
        ``CASTLIKE_TEST_BACKENDS`` take it.
    module : str
        The library's module that must already be imported for an array of it to exist
        ("torch", "dask.array").  castlike never imports it: the namespace test only runs, and
        the adapter is only imported, once the caller has.
    is_namespace : str or callable
        ``f(xp) -> bool``, whether an Array-API namespace is this library's; or the name of
        such a function of array-api-compat ("is_torch_namespace").
    adapter : str
        Where the :class:`~castlike._adapter.Adapter` lives: a module path (its
        ``ADAPTER`` attribute), or ``"module:attribute"``.  The attribute is an adapter, or a
        function of no argument that returns one.
    extra : str, optional
        The pip extra of castlike that installs the library (for install hints and nox), or
        None when it needs none.
    """

    name: str
    module: str
    is_namespace: str | Callable[[Any], bool]
    adapter: str
    extra: str | None = None


#: castlike's own backends, in the order they are asked (NumPy first).
BUILTIN_BACKENDS: tuple[BackendInfo, ...] = (
    BackendInfo("numpy", "numpy", "is_numpy_namespace", "castlike.backends.numpy"),
    BackendInfo("torch", "torch", "is_torch_namespace", "castlike.backends.torch", "torch"),
    BackendInfo("jax", "jax", "is_jax_namespace", "castlike.backends.jax", "jax"),
    BackendInfo("dask", "dask.array", "is_dask_namespace", "castlike.backends.dask", "dask"),
    # The generic Array-API backend (castlike.backends.array_api) serves any namespace
    # array-api-compat knows; array-api-strict is listed so that it is tested and checked.
    BackendInfo(
        "array-api-strict",
        "array_api_strict",
        "is_array_api_strict_namespace",
        "castlike.backends.array_api:strict_adapter",
        "array-api-strict",
    ),
)
