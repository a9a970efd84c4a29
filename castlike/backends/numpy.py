"""NumPy backend: numpy dtypes plus ml_dtypes for the exotic ONNX types
(:mod:`castlike.backends._numpy_dtypes`, which imports ml_dtypes only for its types)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import _native
from .._adapter import Adapter
from .._engine import Engine
from .._native.routes import kernel_for
from ..spec.packing import Layout, layout_of
from ..spec.rules import Mode
from ..spec.tables import byte_table
from ..spec.types import TYPES, Kind, OnnxType, TypeSpec
from ._numpy_dtypes import NUMPY_DTYPES, onnx_type_of_numpy_dtype

__all__ = ["ADAPTER", "NUMPY_DTYPES", "NumpyAdapter", "NumpyEngine"]

_T = OnnxType

_UINTS: dict[int, np.dtype[Any]] = {bits: np.dtype(f"uint{bits}") for bits in (8, 16, 32, 64)}

_WIDE = (_T.FLOAT, _T.DOUBLE, _T.INT32, _T.UINT32, _T.INT64, _T.UINT64)
#: Where NumPy's (and ml_dtypes') own ``astype`` is the rule (see ``Adapter.library_pairs``):
#: its conversions of the wide types to FLOAT, DOUBLE and FLOAT16 are correctly rounded C
#: casts (an integer beyond FLOAT16's range overflows whatever the intermediate), ml_dtypes
#: rounds FLOAT -> BFLOAT16 to nearest even, and FLOAT16/BFLOAT16 widen exactly.
LIBRARY_PAIRS: frozenset[tuple[int, int]] = frozenset(
    {(int(s), int(t)) for s in _WIDE for t in (_T.FLOAT, _T.DOUBLE, _T.FLOAT16) if s != t}
    | {(int(_T.FLOAT), int(_T.BFLOAT16))}
    | {(int(s), int(t)) for s in (_T.FLOAT16, _T.BFLOAT16) for t in (_T.FLOAT, _T.DOUBLE)}
)


class NumpyAdapter(Adapter):
    """NumPy arrays (and NumPy scalars) with ml_dtypes types."""

    packs = True

    name = "numpy"
    # NumPy 2 itself: array-api-compat's wrapper adds nothing the engine uses, and importing
    # it costs ~100 ms (see castlike._frontend._namespace).
    xp = np
    library_pairs = LIBRARY_PAIRS
    wide_class_shortcuts = True

    def library_dtype(self, t: TypeSpec) -> np.dtype[Any] | None:
        if t.code == _T.STRING:
            return np.dtypes.StringDType()
        return NUMPY_DTYPES.get(_T(t.code))

    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        return onnx_type_of_numpy_dtype(dtype)

    def uint(self, bits: int) -> np.dtype[Any]:
        return _UINTS[bits]

    def bits(self, x: Any, t: TypeSpec) -> np.ndarray:
        u = np.asarray(x).view(_UINTS[t.storage_bits])
        if t.is_sub_byte:
            return u & np.uint8((1 << t.bits) - 1)
        if t.kind is Kind.BOOL:
            # R8: a bool whose byte is not 0 or 1 (foreign memory) is True, as NumPy reads it.
            return (u != 0).view(np.uint8)
        return u

    def pattern_table(self, source: TypeSpec, target: TypeSpec, mode: Mode, like: Any) -> Any:
        if source.kind is Kind.BOOL:  # indexed by the byte itself (see pattern_index)
            return byte_table(source, target, mode)
        return super().pattern_table(source, target, mode, like)

    def pattern_index(self, x: Any, t: TypeSpec) -> np.ndarray:
        if t.kind is Kind.BOOL:
            return np.asarray(x).view(np.uint8)  # any byte: the table has 256 entries
        return self.bits(x, t)

    def from_bits(self, u: Any, t: TypeSpec) -> np.ndarray:
        storage = _UINTS[t.storage_bits]
        return np.asarray(u).astype(storage, copy=False).view(NUMPY_DTYPES[_T(t.code)])

    def astype(self, x: Any, t: TypeSpec) -> np.ndarray:
        return np.asarray(x).astype(NUMPY_DTYPES[_T(t.code)])

    def device_table(self, table: np.ndarray, like: Any) -> np.ndarray:
        return table

    def clip(self, x: Any, low: float, high: float) -> np.ndarray:
        # NumPy's own: array-api-compat's wrapper costs ~10 us a call, a third of a small cast.
        return np.clip(x, low, high)

    def take(self, table: Any, index: Any) -> np.ndarray:
        index = np.asarray(index)
        if index.dtype == np.uint64:
            # NumPy 2.0's take refuses uint64 indices (later releases cast them); a table's
            # indices are far below 2**63, so the signed view is the same numbers, free.
            index = index.view(np.int64)
        return np.take(table, index)

    def from_numpy(self, array: np.ndarray, like: Any = None) -> np.ndarray:
        return np.asarray(array)

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def engine(self) -> Engine:
        return NumpyEngine(self)

    def repeat_cast(self, plan: Any, *, packed: bool = False) -> Any:
        native = _native.module()
        if native is None:
            return None
        kernel = kernel_for(native, plan.source, plan.target, plan.mode)
        if kernel is None:
            return None
        target = plan.target
        if packed:
            layout = layout_of(target)
            assert layout is not None

            def run_packed(x: np.ndarray) -> np.ndarray | None:
                if x.ndim == 0:
                    return None  # the full path's error
                return _run_packing_kernel(kernel, x, layout)

            return run_packed

        def run(x: np.ndarray) -> np.ndarray:
            """Every array the kernel's repeat() leaves: broadcast, strided, misaligned or
            byte-swapped."""
            if not x.dtype.isnative:
                distinct = _distinct(x)  # before the copy to machine byte order
                if distinct is not None:
                    return _repeated(run(distinct), x.shape)
                x = x.astype(x.dtype.newbyteorder("="))
            return _run_kernel(kernel, x, target)

        # The usual array (C-contiguous, aligned, in machine byte order) in one C call, with
        # no Python layer between the lookup and the kernel: at 10**6 elements each costs a
        # few microseconds, run with the caches cold after the kernel's pass.
        return functools.partial(kernel.repeat, np.empty, NUMPY_DTYPES[_T(target.code)], run)


class NumpyEngine(Engine):
    """The shared rules, run by the native kernels where they cover the cast.

    What it overrides, and why: :meth:`cast` (the native kernels first; a broadcast array's
    distinct elements only; byte-swapped input to machine byte order; large wide arrays block by
    block in the caches) and :meth:`run` (NumPy's floating-point warnings silenced: NaN and
    Inf are handled by the routes explicitly).  The adapter declares the DOUBLE class table
    and the clipped integers into the small floats (``wide_class_shortcuts``): fewer passes
    than rounding to odd first, on NumPy's uint64 arithmetic.
    """

    #: Elements per block for the wide paths: their temporaries then stay in the CPU caches.
    BLOCK = 1 << 16

    def cast(self, x: Any, plan: Any) -> Any:
        x = np.asarray(x)
        distinct = _distinct(x)
        if distinct is not None:  # a broadcast array: each distinct element once
            return _repeated(self.cast(distinct, plan), x.shape)
        if not x.dtype.isnative:  # byte-swapped data (a Dask block, say): machine byte order first
            x = x.astype(x.dtype.newbyteorder("="))
        source, target = plan.source, plan.target
        native = _native.module()
        if native is not None:
            kernel = kernel_for(native, source, target, plan.mode)
            if kernel is not None:
                return _run_kernel(kernel, x, target)
        return self.cast_pure(x, plan)

    def cast_packed(self, x: Any, plan: Any, *, source_row: int | None, pack: bool) -> Any:
        """The native kernel's one pass where it covers the cast: it unpacks or packs rows
        block by block in the caches around the cast (see ``Kernel.packed``); the composed
        path otherwise."""
        native = _native.module()
        kernel = None if native is None else kernel_for(native, plan.source, plan.target, plan.mode)
        if kernel is None:
            with np.errstate(all="ignore"):
                return super().cast_packed(x, plan, source_row=source_row, pack=pack)
        assert native is not None
        x = np.asarray(x)
        target = plan.target
        threads = _native.get_num_threads()
        if source_row is not None:
            source_layout = layout_of(plan.source)
            assert source_layout is not None
            out = np.empty((*x.shape[:-1], source_row), dtype=NUMPY_DTYPES[_T(target.code)])
            if out.size:
                data = np.ascontiguousarray(x)
                kernel.unpacked(data, out, source_row, source_layout.bits, threads)
            if not pack:
                return out
            x = out
            kernel = kernel_for(native, target, target, plan.mode)  # the bits as they are
        layout = layout_of(target)
        assert layout is not None
        return _run_packing_kernel(kernel, x, layout)

    def cast_pure(self, x: np.ndarray, plan: Any) -> Any:
        """The cast by NumPy operations only (the reference for the native kernels)."""
        route = self.route(plan.source, plan.target, plan.mode)
        if route.single_op or route.source.storage_bits <= 16 or x.size <= 2 * self.BLOCK:
            return self.run(x, route)
        # Several passes: run them block by block in the caches.
        flat = np.ascontiguousarray(x).reshape(-1)
        out = np.empty(flat.shape, dtype=NUMPY_DTYPES[_T(route.target.code)])
        for start in range(0, flat.size, self.BLOCK):
            out[start : start + self.BLOCK] = self.run(flat[start : start + self.BLOCK], route)
        return out.reshape(x.shape)

    def run(self, x: Any, route: Any) -> Any:
        # NaN and Inf are handled by the routes explicitly: NumPy's warnings about them are not
        # the user's concern.
        with np.errstate(all="ignore"):
            return super().run(x, route)


def _distinct(x: np.ndarray) -> np.ndarray | None:
    """The distinct elements of a broadcast array: ``x`` with every axis of stride 0 (and
    length 2 or more) taken at length 1, a view; None where ``x`` has no such axis.

    Casting these and repeating the result costs memory and time for the result only, where
    the kernels' contiguous copy of a broadcast input would be as large as the input it
    stands for (``np.broadcast_to`` of a row to 10**7 rows, say).
    """
    if 0 not in x.strides or x.size <= 1:  # the usual case, decided by one tuple search
        return None
    if not any(stride == 0 and n > 1 for stride, n in zip(x.strides, x.shape, strict=True)):
        return None
    return x[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in x.strides)]


def _repeated(cast: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The cast of :func:`_distinct`'s elements repeated to ``shape``: a new C-contiguous,
    writeable array, as NumPy's ``astype`` of a broadcast array gives."""
    out = np.empty(shape, dtype=cast.dtype)
    np.copyto(out, cast)
    return out


def _run_kernel(kernel: Any, x: np.ndarray, target: TypeSpec) -> np.ndarray:
    """Run a native kernel on ``x`` into a new array of ``target``'s dtype."""
    if not (x.flags.c_contiguous and x.flags.aligned):
        # A broadcast array is never C-contiguous: checked here, at no cost to the others.
        distinct = _distinct(x)
        if distinct is not None:
            return _repeated(_run_kernel(kernel, distinct, target), x.shape)
        x = np.array(x, order="C")  # one aligned, contiguous copy; the kernels read it once
    out = np.empty(x.shape, dtype=NUMPY_DTYPES[_T(target.code)])
    kernel(x, out, _native.get_num_threads())
    return out


def _run_packing_kernel(kernel: Any, x: np.ndarray, layout: Layout) -> np.ndarray:
    """Run a native kernel on ``x`` (rows along its last axis) into new packed rows (uint8)."""
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    n = x.shape[-1]
    out = np.empty((*x.shape[:-1], layout.packed_length(n)), dtype=np.uint8)
    if x.size:
        x = np.ascontiguousarray(x)  # aligned too: a fresh copy where it was not contiguous
        kernel.packed(x, out, n, layout.bits, _native.get_num_threads())
    return out


#: The one NumPy adapter (adapters hold no per-call state).
ADAPTER = NumpyAdapter()

# Every numeric type must have a NumPy dtype: ml_dtypes provides the exotic ones.
assert all(t in NUMPY_DTYPES for t in TYPES if t != _T.STRING)
