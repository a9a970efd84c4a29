"""Backend registry: pick the adapter for an Array-API namespace, lazily.

As in einops, a library is only ever touched if the caller already imported it: the adapter
module for torch is imported when a torch tensor arrives, never before, and castlike itself
never imports torch, jax or dask.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import array_api_compat as aac

from ..errors import BackendTypeError
from ..spec.types import OnnxType
from ._base import Adapter

__all__ = ["Adapter", "adapter_for", "adapter_named", "loaded_adapters", "onnx_type_of_dtype"]

#: (library module that must be imported, namespace test, castlike adapter module)
_REGISTRY: tuple[tuple[str, Any, str], ...] = (
    ("numpy", aac.is_numpy_namespace, "numpy"),
    ("torch", aac.is_torch_namespace, "torch"),
    ("jax", aac.is_jax_namespace, "jax"),
    ("dask", aac.is_dask_namespace, "dask"),
)


#: Adapters already imported, by name.  A plain dict rather than ``lru_cache``, because
#: torch.compile traces adapter_for/adapter_named: Dynamo ignores ``lru_cache`` (and then
#: meets importlib, which it refuses to trace) but reads a dict.
_ADAPTERS: dict[str, Adapter] = {}


def adapter_named(name: str) -> Adapter:
    """The adapter of one library by its castlike module name ("numpy", "torch", ...)."""
    adapter = _ADAPTERS.get(name)
    if adapter is None:
        adapter = _ADAPTERS[name] = _import_adapter(name)
    return adapter


def _import_adapter(name: str) -> Adapter:
    # Static import statements, which Dynamo executes (it refuses importlib), so that a first
    # cast inside torch.compile(fullgraph=True) works too.
    if name == "numpy":
        from .numpy import ADAPTER as numpy_adapter

        return numpy_adapter
    if name == "torch":
        from .torch import ADAPTER as torch_adapter

        return torch_adapter
    try:
        module = importlib.import_module(f"castlike.backends.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"castlike.backends.{name}":
            raise BackendTypeError(f"castlike has no {name} backend yet") from None
        raise
    adapter: Adapter = module.ADAPTER
    return adapter


def adapter_for(xp: Any) -> Adapter:
    """The adapter for the Array-API namespace ``xp``."""
    for _library, is_namespace, module in _REGISTRY:
        if is_namespace(xp):
            return adapter_named(module)
    name = getattr(xp, "__name__", repr(xp))
    raise BackendTypeError(
        f"castlike has no backend for the array namespace {name!r}; "
        "supported: numpy, torch, jax, dask"
    )


def loaded_adapters() -> list[Adapter]:
    """Adapters of the libraries the caller has imported (numpy always)."""
    out = []
    for library, _is_namespace, module in _REGISTRY:
        if library in sys.modules:
            try:
                out.append(adapter_named(module))
            except BackendTypeError:
                continue
    return out


def onnx_type_of_dtype(dtype: Any) -> OnnxType | None:
    """The ONNX type of a dtype object of any imported library, or None."""
    # The dtype's own library first (a torch.dtype is asked of torch before numpy): another
    # library's parser may raise on it, which torch.compile cannot trace.
    owner = type(dtype).__module__.partition(".")[0]
    adapters = loaded_adapters()
    for adapter in [a for a in adapters if a.name == owner] + adapters:
        found = adapter.onnx_type_of(dtype)
        if found is not None:
            return found
    return None
