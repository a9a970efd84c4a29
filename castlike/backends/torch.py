"""PyTorch backend: torch tensors on any device, eager or under ``torch.compile``.

Imported only when the caller passes a torch tensor (or asks for this backend by name), so
castlike never imports torch on its own.

What torch can hold (rule R10): every numeric ONNX type except FLOAT4E2M1 (torch only has
the packed ``float4_e2m1fn_x2``) and FLOAT6E2M3/FLOAT6E3M2 (no dtype).  The one-byte "shell"
dtypes ``torch.int4``, ``torch.uint4``, ``torch.int2`` and ``torch.uint2`` hold the sub-byte
types one element per byte, low bits significant, like ml_dtypes; torch implements almost no
operation on them, so castlike computes in ``uint8`` and reinterprets with ``view``.

Why a :class:`TorchEngine`: the shared rules (:mod:`castlike._engine`) run unchanged, but some
of their *steps* are computed with other torch operations, because torch 2.13

* implements no arithmetic, shift or ordering on ``uint16``/``uint32``/``uint64`` (only
  ``&``, ``|``, ``==``, ``!=``, conversions and ``where``): bit arithmetic is done on the
  signed view of the same width, masked where an arithmetic shift would sign-extend;
* has no ``take``/``index_select`` for ``uint16``+ tables: gathers use ``index_select`` on a
  signed or ``uint8`` view;
* rounds DOUBLE -> FLOAT16 (and -> float8, BFLOAT16) through FLOAT, twice: those go through
  FLOAT rounded to odd instead;
* differs from R4 in what overflow, Inf and NaN become in its float8 conversions, while
  rounding everything else exactly: castlike uses its rounding and repairs the rest from the
  spec's tables (:meth:`TorchEngine.to_small_float`);
* cannot have numpy, ``functools.lru_cache``, ``cached_property`` or Fraction arithmetic on
  the path ``torch.compile`` traces: decisions are precomputed at import, and lookup tables
  reach compiled graphs through the custom operator ``castlike::lookup_table``;
* cannot compile ``float8_e8m0fnu`` or the shell dtypes with Inductor: their bytes cross
  compiled graphs through ``castlike::bytes_of`` / ``castlike::bytes_as``.

torch's own ``.to()`` is used where it equals the rule (checked by the exhaustive and curated
tests, and for FLOAT -> float8/BFLOAT16 on all 2**32 FLOATs by ``benchmarks/bench_torch.py
--verify-native``); everything else comes from the exact lookup tables of
:mod:`castlike._tables`.  Measurements behind each choice are in ``docs/torch.rst``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import array_api_compat.torch as xp_torch
import numpy as np
import torch

from .. import _native
from .._engine import Engine, _largest_float_below
from .._native.routes import covers, kernel_for
from .._tables import FLOAT32_CLASS_BITS, float32_class_table, pattern_table
from ..errors import BackendTypeError
from ..spec.rules import Action, Mode, Profile, RoundMode, overflow_rule
from ..spec.types import TYPES, Kind, OnnxType, Special, TypeSpec, spec_of
from ._base import Adapter
from .numpy import ADAPTER as NUMPY_ADAPTER
from .numpy import NUMPY_DTYPES

if TYPE_CHECKING:
    from ..spec.plan import Plan

__all__ = ["ADAPTER", "TORCH_DTYPES", "TorchAdapter", "TorchEngine"]

_T = OnnxType

#: torch dtype name of each ONNX type torch can hold (looked up by name: older torch versions
#: lack some, e.g. ``float8_e8m0fnu`` arrived in torch 2.7).
_DTYPE_NAMES: dict[OnnxType, str] = {
    _T.FLOAT: "float32",
    _T.UINT8: "uint8",
    _T.INT8: "int8",
    _T.UINT16: "uint16",
    _T.INT16: "int16",
    _T.INT32: "int32",
    _T.INT64: "int64",
    _T.BOOL: "bool",
    _T.FLOAT16: "float16",
    _T.DOUBLE: "float64",
    _T.UINT32: "uint32",
    _T.UINT64: "uint64",
    _T.BFLOAT16: "bfloat16",
    _T.FLOAT8E4M3FN: "float8_e4m3fn",
    _T.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    _T.FLOAT8E5M2: "float8_e5m2",
    _T.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    _T.UINT4: "uint4",
    _T.INT4: "int4",
    _T.FLOAT8E8M0: "float8_e8m0fnu",
    _T.UINT2: "uint2",
    _T.INT2: "int2",
}

#: The torch dtype of every ONNX type this torch can hold.
TORCH_DTYPES: dict[OnnxType, torch.dtype] = {
    t: getattr(torch, name) for t, name in _DTYPE_NAMES.items() if hasattr(torch, name)
}
_BY_DTYPE: dict[torch.dtype, OnnxType] = {dtype: t for t, dtype in TORCH_DTYPES.items()}
#: The same by plain int code (no enum conversion on the hot path of every cast).
_BY_CODE: dict[int, torch.dtype] = {int(t): dtype for t, dtype in TORCH_DTYPES.items()}

#: What to do instead, for the types no torch version holds (R10).
_NOT_IN_TORCH: dict[OnnxType, str] = {
    _T.FLOAT4E2M1: (
        "PyTorch has no one-element-per-byte FLOAT4E2M1 dtype (torch.float4_e2m1fn_x2 packs "
        "two values per byte); cast a NumPy array instead, e.g. "
        "castlike.cast(x.cpu().numpy(), 'FLOAT4E2M1') gives an ml_dtypes.float4_e2m1fn array"
    ),
    _T.FLOAT6E2M3: (
        "PyTorch has no FLOAT6E2M3 dtype; cast a NumPy array instead, e.g. "
        "castlike.cast(x.cpu().numpy(), 'FLOAT6E2M3') gives an ml_dtypes.float6_e2m3fn array"
    ),
    _T.FLOAT6E3M2: (
        "PyTorch has no FLOAT6E3M2 dtype; cast a NumPy array instead, e.g. "
        "castlike.cast(x.cpu().numpy(), 'FLOAT6E3M2') gives an ml_dtypes.float6_e3m2fn array"
    ),
    _T.STRING: (
        "PyTorch tensors hold no strings; casting to STRING returns a NumPy string array, and "
        "strings are read from NumPy arrays (rule R9)"
    ),
}

#: Unsigned storage dtype of each width (for views only: torch computes little on them).
_UINT: dict[int, torch.dtype] = {
    8: torch.uint8,
    16: torch.uint16,
    32: torch.uint32,
    64: torch.uint64,
}
#: Same-width dtype that ``index_select`` accepts for tables (uint16+ are not implemented).
_GATHER: dict[int, torch.dtype] = {
    8: torch.uint8,
    16: torch.int16,
    32: torch.int32,
    64: torch.int64,
}
#: Signed dtype of each width: the view torch can do arithmetic, shifts and comparisons on.
_SIGNED: dict[int, torch.dtype] = {
    8: torch.int8,
    16: torch.int16,
    32: torch.int32,
    64: torch.int64,
}

_FLOAT = spec_of(_T.FLOAT)
_DOUBLE = spec_of(_T.DOUBLE)
_BFLOAT16 = spec_of(_T.BFLOAT16)

# -- lookup tables as device constants ---------------------------------------------------------

#: (table kind, source code, target code, mode, device) -> table tensor on that device.
_TABLES: dict[tuple[str, int, int, Mode, torch.device], torch.Tensor] = {}


def _host_table(kind: str, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    """The NumPy table of one kind, widened so that every byte of the index has an entry.

    Sources held in a byte (BOOL and the sub-byte types) get a 256-entry table indexed by the
    whole byte, so that the gather needs no mask: the entry of byte ``b`` is that of its low
    ``bits`` bits (BOOL: any nonzero byte reads as True).
    """
    if kind == "class":
        return float32_class_table(target, mode)
    table = pattern_table(source, target, mode)
    if source.storage_bits == 8 and table.shape[0] < 256:
        index = np.arange(256)
        if source.kind is Kind.BOOL:
            index = (index != 0).astype(np.intp)
        else:
            index = index & ((1 << source.bits) - 1)
        table = table[index]
    return table


def _device_table(
    kind: str, source: TypeSpec, target: TypeSpec, mode: Mode, like: torch.Tensor
) -> torch.Tensor:
    """A lookup table (kind "pattern" or "class") as a tensor on ``like``'s device.

    Eagerly: the cached tensor.  Under ``torch.compile``: the custom operator
    ``castlike::lookup_table``, opaque to the compiler, so that the host-side construction
    (numpy, lru_cache, the Fraction oracle) is never traced.  (``assume_constant_result`` would
    embed it as a constant, but torch 2.13 fails on a graph that calls it twice, and passes a
    :class:`Mode` built during tracing with its *default* field values, silently: hence plain
    values as arguments.)
    """
    args = (
        kind,
        source.code,
        target.code,
        mode.saturate,
        mode.round_mode.value,
        mode.profile.value,
        mode.inf_to_fnuz_is_nan,
    )
    if torch.compiler.is_compiling():
        return torch.ops.castlike.lookup_table(like, *args)
    return _cached_table(*args, like.device)


def _cached_table(
    kind: str,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
    device: torch.device,
) -> torch.Tensor:
    """A lookup table as a tensor on ``device``, built on the host once and cached.

    Entries are stored in a dtype ``index_select`` accepts (uint8 or a signed type of the
    target's storage width); :meth:`TorchAdapter.from_bits` reinterprets them.
    """
    mode = Mode(saturate, RoundMode(round_mode), Profile(profile), inf_to_fnuz_is_nan)
    key = (kind, source_code, target_code, mode, device)
    found = _TABLES.get(key)
    if found is None:
        source, target = TYPES[_T(source_code)], TYPES[_T(target_code)]
        host = np.ascontiguousarray(_host_table(kind, source, target, mode))
        gather = _GATHER[host.dtype.itemsize * 8]
        found = torch.from_numpy(host.copy()).view(gather).to(device)
        _TABLES[key] = found
    return found


@torch.library.custom_op("castlike::lookup_table", mutates_args=())
def _lookup_table(
    like: torch.Tensor,
    kind: str,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
) -> torch.Tensor:
    """The cached table on ``like``'s device, as a copy (the compiled graph owns its outputs
    and may reuse their memory; a copy of at most 256 KiB keeps the cache intact)."""
    key = (kind, source_code, target_code, saturate, round_mode, profile, inf_to_fnuz_is_nan)
    return _cached_table(*key, like.device).clone()


@_lookup_table.register_fake
def _lookup_table_fake(
    like: torch.Tensor,
    kind: str,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
) -> torch.Tensor:
    source, target = TYPES[_T(source_code)], TYPES[_T(target_code)]
    if kind == "class":
        size = 1 << (32 - FLOAT32_CLASS_BITS + 1)
    else:
        size = 1 << max(source.storage_bits, source.bits)
    return like.new_empty((size,), dtype=_GATHER[target.storage_bits])


#: Types whose torch dtype Inductor (torch 2.13, CPU) cannot compile: it has no C++ type for
#: ``float8_e8m0fnu`` and the shell dtypes, and cannot lower a ``view`` to or from the latter.
#: Under ``torch.compile`` their bytes cross the graph through the two opaque operators below
#: (a copy of one byte per element), and nothing else touches them.
_OPAQUE_TO_INDUCTOR = frozenset({_T.FLOAT8E8M0, _T.INT4, _T.UINT4, _T.INT2, _T.UINT2})


@torch.library.custom_op("castlike::bytes_of", mutates_args=())
def _bytes_of(x: torch.Tensor) -> torch.Tensor:
    """The bytes of a one-byte tensor, as a uint8 copy."""
    return x.view(torch.uint8).clone()


@_bytes_of.register_fake
def _bytes_of_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x, dtype=torch.uint8)


@torch.library.custom_op("castlike::bytes_as", mutates_args=())
def _bytes_as(u: torch.Tensor, code: int) -> torch.Tensor:
    """A uint8 tensor's bytes as the torch dtype of the ONNX type ``code``, as a copy."""
    return u.clone().view(TORCH_DTYPES[_T(code)])


@_bytes_as.register_fake
def _bytes_as_fake(u: torch.Tensor, code: int) -> torch.Tensor:
    return torch.empty_like(u, dtype=TORCH_DTYPES[_T(code)])


def _name_the_shell_dtypes() -> None:
    """Work around torch 2.13: the table of dtype abbreviations that the FX graph printer
    uses lacks the shell dtypes, and AOTAutograd prints every graph it caches, so compiling
    any function whose graph holds an ``int4`` tensor fails with ``KeyError: torch.int4``.
    Adding the missing entries (each dtype's own ``abbr``) changes nothing else."""
    try:
        from torch.utils._dtype_abbrs import dtype_abbrs
    except ImportError:  # another torch version: nothing to repair
        return
    for name in ("int1", "int2", "int3", "int4", "int5", "int6", "int7"):
        for dtype in (getattr(torch, name, None), getattr(torch, "u" + name, None)):
            if isinstance(dtype, torch.dtype) and dtype not in dtype_abbrs:
                dtype_abbrs[dtype] = getattr(dtype, "abbr", str(dtype).removeprefix("torch."))


_name_the_shell_dtypes()


def _gather(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for an int32/int64 ``index`` of any shape (one pass, any device)."""
    return torch.index_select(table, 0, index.reshape(-1)).reshape(index.shape)


# -- the adapter --------------------------------------------------------------------------------


class TorchAdapter(Adapter):
    """torch tensors: the dtypes above, on the tensor's own device."""

    name = "torch"
    xp = xp_torch

    def __init__(self) -> None:
        self._engine: TorchEngine | None = None

    # -- types -----------------------------------------------------------------------------
    def native_dtype(self, t: TypeSpec) -> torch.dtype | None:
        return _BY_CODE.get(t.code)

    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        if isinstance(dtype, torch.dtype):
            return _BY_DTYPE.get(dtype)
        return None

    def cannot_hold_hint(self, t: TypeSpec) -> str:
        hint = _NOT_IN_TORCH.get(_T(t.code))
        if hint is not None:
            return hint
        name = _DTYPE_NAMES.get(_T(t.code), "?")
        return (
            f"this torch ({torch.__version__}) has no torch.{name}; upgrade torch, or cast a "
            f"NumPy array instead (castlike.cast(x.cpu().numpy(), {t.name!r}))"
        )

    def _require(self, t: TypeSpec) -> torch.dtype:
        dtype = self.native_dtype(t)
        if dtype is None:
            raise BackendTypeError(f"torch cannot hold {t.name}; {self.cannot_hold_hint(t)}")
        return dtype

    # -- primitives --------------------------------------------------------------------------
    def uint(self, bits: int) -> torch.dtype:
        return _UINT[bits]

    def bits(self, x: Any, t: TypeSpec) -> torch.Tensor:
        """Unsigned view of the storage (a ``uint16``+ result is for views and gathers only:
        torch does no arithmetic on it; :class:`TorchEngine` uses signed views instead)."""
        u = self.storage(x, t)
        if t.is_sub_byte:
            return u & ((1 << t.bits) - 1)
        return u

    def storage(self, x: Any, t: TypeSpec) -> torch.Tensor:
        """The storage of ``x`` (type ``t``) as unsigned integers of its width, unmasked.

        A view, except for the types in :data:`_OPAQUE_TO_INDUCTOR` under ``torch.compile``:
        an opaque operator copies the bytes instead.
        """
        if t.code in _OPAQUE_TO_INDUCTOR and torch.compiler.is_compiling():
            return torch.ops.castlike.bytes_of(x)
        return x.view(_UINT[t.storage_bits])

    def from_bits(self, u: Any, t: TypeSpec) -> torch.Tensor:
        """Reinterpret integers of ``t``'s storage width as ``t``; a wider integer array is
        narrowed first (keeping the low bits).  Under ``torch.compile`` the types in
        :data:`_OPAQUE_TO_INDUCTOR` are a copy by an opaque operator, as in :meth:`storage`."""
        width = t.storage_bits
        if u.dtype.itemsize * 8 != width:
            u = u.to(_SIGNED[width] if width > 8 else torch.uint8)
        if t.code in _OPAQUE_TO_INDUCTOR and torch.compiler.is_compiling():
            return torch.ops.castlike.bytes_as(u.view(torch.uint8), t.code)
        return u.view(self._require(t))

    def astype(self, x: Any, t: TypeSpec) -> torch.Tensor:
        if t.is_sub_byte:  # torch has no conversions to the shell dtypes
            raise TypeError(f"no native conversion to {t.name} in torch; use from_bits")
        # copy=True: a cast to the tensor's own dtype must not hand back the input itself.
        return x.to(self._require(t), copy=True)

    def device_table(self, table: np.ndarray, like: Any) -> torch.Tensor:
        """A host table on ``like``'s device, cached (the base engine's interface; the torch
        engine itself uses :func:`_device_table`, which also works under torch.compile)."""
        key = (id(table), like.device)
        found = _HOST_TABLES.get(key)
        # Keyed by id: the host table is kept with its copy, so that the id is never reused.
        if found is None or found[0] is not table:
            contiguous = np.ascontiguousarray(table)
            gather = _GATHER[contiguous.dtype.itemsize * 8]
            found = (table, torch.from_numpy(contiguous.copy()).view(gather).to(like.device))
            _HOST_TABLES[key] = found
        return found[1]

    def take(self, table: Any, index: Any) -> torch.Tensor:
        if table.dtype not in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
            table = table.view(_GATHER[table.dtype.itemsize * 8])
        if index.dtype not in (torch.int32, torch.int64):
            index = index.to(torch.int32)
        return _gather(table, index)

    # -- moving data -------------------------------------------------------------------------
    def from_numpy(self, array: np.ndarray, like: Any = None) -> torch.Tensor:
        """A NumPy array of a numeric ONNX type as a tensor (a copy) on ``like``'s device."""
        array = np.asarray(array)
        found = NUMPY_ADAPTER.onnx_type_of(array.dtype)
        if found is None or found == _T.STRING:
            raise BackendTypeError(f"torch cannot hold NumPy arrays of dtype {array.dtype}")
        t = TYPES[found]
        dtype = self._require(t)
        # A C-ordered, native-byte-order copy that the tensor then owns.
        host = np.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=True)
        tensor = torch.from_numpy(host.view(f"uint{t.storage_bits}")).view(dtype)
        if like is not None:
            tensor = tensor.to(like.device)
        return tensor

    def to_numpy(self, x: Any) -> np.ndarray:
        """A tensor as a NumPy array of the same ONNX type (bits kept, on the host)."""
        _check_strided(x)
        if x.device.type == "meta":
            raise BackendTypeError(
                "torch: a meta tensor has no data to bring to the host (as a STRING result "
                "needs); cast a tensor on a real device, or to a numeric type (which a meta "
                "tensor takes, giving a meta tensor)"
            )
        found = self.onnx_type_of(x.dtype)
        if found is None:
            raise BackendTypeError(f"{x.dtype} is not a torch dtype of an ONNX type")
        t = TYPES[found]
        host = x.detach().view(_UINT[t.storage_bits]).cpu().numpy()
        return host.view(NUMPY_DTYPES[found])

    # -- the engine ---------------------------------------------------------------------------
    def engine(self) -> TorchEngine:
        if self._engine is None:
            self._engine = TorchEngine(self)
        return self._engine


def _check_strided(x: torch.Tensor) -> None:
    """Refuse sparse, nested and other non-strided tensors with a BackendTypeError.

    The rules work on every element: a sparse tensor's implicit zeros do not always cast to
    zero (0 -> FLOAT8E8M0 is 2**-127 or NaN, R6), so casting only its stored values would be
    wrong, and aten lacks most of the steps for sparse layouts anyway.
    """
    if x.is_nested:  # a nested tensor's layout reads strided (or jagged), but it is neither
        raise BackendTypeError(
            "torch: castlike casts strided (dense) tensors, and this one is nested; cast its "
            "components (x.unbind()) or a padded copy (x.to_padded_tensor(0))"
        )
    if x.layout is not torch.strided:
        raise BackendTypeError(
            f"torch: castlike casts strided (dense) tensors, and this one has layout "
            f"{x.layout}; cast x.to_dense(), or, where 0 casts to 0, cast the stored values "
            "(x.values()) and rebuild the sparse tensor"
        )


#: (id of a host table, device) -> (that host table, its copy on the device).
_HOST_TABLES: dict[tuple[int, torch.device], tuple[np.ndarray, torch.Tensor]] = {}


# -- the native kernels on CPU tensors ----------------------------------------------------------


def _native_enabled() -> bool:
    """Whether CPU tensors go through the native kernels (``CASTLIKE_TORCH_NATIVE=0``: no)."""
    return _native.module() is not None and os.environ.get("CASTLIKE_TORCH_NATIVE", "1") != "0"


def _native_kernel(source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
    """The NumPy backend's native kernel for this cast, or None (disabled, or not covered)."""
    module = _native.module()
    if module is None or not _native_enabled():
        return None
    return kernel_for(module, source, target, mode)


@torch.library.custom_op("castlike::native_cast", mutates_args=())
def _native_cast(
    x: torch.Tensor,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
) -> torch.Tensor:
    """A cast of a CPU tensor by the native kernel, as one opaque operator of a compiled graph.
    The result has the target's dtype, except for the types Inductor cannot hold, which come
    back as their bytes (uint8) for ``castlike::bytes_as``."""
    source, target = TYPES[_T(source_code)], TYPES[_T(target_code)]
    mode = Mode(saturate, RoundMode(round_mode), Profile(profile), inf_to_fnuz_is_nan)
    module = _native.module()
    assert module is not None, "traced only where _native_enabled()"
    kernel = kernel_for(module, source, target, mode)
    return _run_native(kernel, x, source, _native_cast_dtype(target), target)


def _native_cast_dtype(target: TypeSpec) -> torch.dtype:
    if _T(target.code) in _OPAQUE_TO_INDUCTOR:
        return torch.uint8
    return TORCH_DTYPES[_T(target.code)]


@_native_cast.register_fake
def _native_cast_fake(
    x: torch.Tensor,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
) -> torch.Tensor:
    return torch.empty_like(x, dtype=_native_cast_dtype(TYPES[_T(target_code)]))


def _run_native(
    kernel: Any, x: torch.Tensor, source: TypeSpec, dtype: torch.dtype, target: TypeSpec
) -> torch.Tensor:
    """Run a native kernel on a CPU tensor's memory (a zero-copy NumPy view of its bytes) into
    a tensor torch allocates.  A non-contiguous tensor is made contiguous first (one copy, of
    its same-width unsigned view: torch has no copy kernel for the shell dtypes)."""
    bits = x.view(_UINT[source.storage_bits])
    if not bits.is_contiguous():
        bits = bits.contiguous()
    out = torch.empty(x.shape, dtype=dtype)
    kernel(bits.numpy(), out.view(_UINT[target.storage_bits]).numpy(), _native.get_num_threads())
    return out


# -- the engine ---------------------------------------------------------------------------------


class TorchEngine(Engine):
    """The shared rules with torch-specific steps (see the module docstring for why).

    FLOAT bit patterns are ``int32`` two's complement views here (torch has no ``uint32``
    arithmetic): :meth:`float32_bits` returns them and every step that consumes them
    (:meth:`float32_class_index`, :meth:`to_bfloat16`) is written for them.
    """

    a: TorchAdapter

    #: Elements per block for the several-pass paths on the CPU, eagerly (see :meth:`cast`),
    #: and the size from which they are used (measured: below it, glibc recycles the
    #: temporaries itself and blocks only add per-op overhead).
    BLOCK = 1 << 17
    BLOCKED_FROM = 1 << 21

    def cast(self, x: Any, plan: Plan) -> Any:
        """Cast ``x``; large CPU tensors on several-pass paths go block by block.

        Casts are not differentiable (they round; R3-R8): the result never requires grad,
        whatever the target.  ``detach()`` is a free view and keeps autograd off every step.

        Eagerly, every torch op allocates its result, and a large CPU allocation (beyond
        glibc's 32 MiB mmap threshold) is fresh memory that the kernel must fault in page by
        page (3-6x the op itself at 10**7 elements, measured).  So from
        :attr:`BLOCKED_FROM` elements a path of several ops runs on blocks of :attr:`BLOCK`
        elements whose temporaries the allocator recycles, each block written into the one
        result tensor.  Not under ``torch.compile`` (Inductor fuses the ops into one loop), not
        on other devices (their caching allocators recycle), not for one-op paths.
        """
        _check_strided(x)
        x = x.detach()
        source, target, mode = plan.source, plan.target, plan.mode
        if x.device.type == "cpu" and x.layout is torch.strided:
            if torch.compiler.is_compiling():
                if (
                    _native_enabled()
                    and covers(source, target, mode)
                    and not self._fuses_to_one_loop(source, target, mode)
                ):
                    return self._compiled_native(x, source, target, mode)
            else:
                kernel = _native_kernel(source, target, mode)
                if kernel is not None:
                    return _run_native(kernel, x, source, self.a._require(target), target)
        if (
            torch.compiler.is_compiling()  # first: no guard on the size while tracing
            or x.device.type != "cpu"
            or x.numel() < self.BLOCKED_FROM
            or self._one_op(source, target, mode)
        ):
            return super().cast(x, plan)
        n = x.numel()
        # Copies go through same-width integer views: torch has no copy kernel for the shell
        # dtypes (reshape copies a non-contiguous tensor).
        flat = x.view(_GATHER[source.storage_bits]).reshape(-1).view(x.dtype)
        out = torch.empty(n, dtype=self.a._require(target))
        out_bits = out.view(_GATHER[target.storage_bits])
        for start in range(0, n, self.BLOCK):
            block = super().cast(flat[start : start + self.BLOCK], plan)
            out_bits[start : start + self.BLOCK] = block.view(out_bits.dtype)
        return out.reshape(x.shape)

    def _fuses_to_one_loop(self, source: TypeSpec, target: TypeSpec, mode: Mode) -> bool:
        """Whether Inductor compiles this cast's torch ops into one vectorised loop that is
        faster than the opaque native operator (measured: docs/torch.rst): from FLOAT or
        DOUBLE, the one-op casts and the casts to 8- to 64-bit integers (a where, a clamp, a
        conversion).  Gathers (every source of 16 bits or fewer) and the several-step casts go
        to the native operator."""
        if not (source.is_float and source.bits > 16):
            return False
        if self._one_op(source, target, mode):
            return True
        return target.is_integer and not target.is_sub_byte

    def _compiled_native(
        self, x: torch.Tensor, source: TypeSpec, target: TypeSpec, mode: Mode
    ) -> torch.Tensor:
        """Under ``torch.compile``: the native kernel as the opaque ``castlike::native_cast``
        (faster than the graph of torch ops Inductor builds for most casts: docs/torch.rst)."""
        m = mode.effective_for(target)
        result = torch.ops.castlike.native_cast(
            x,
            source.code,
            target.code,
            m.saturate,
            m.round_mode.value,
            m.profile.value,
            m.inf_to_fnuz_is_nan,
        )
        if _T(target.code) in _OPAQUE_TO_INDUCTOR:
            return torch.ops.castlike.bytes_as(result, target.code)
        return result

    def _one_op(self, source: TypeSpec, target: TypeSpec, mode: Mode) -> bool:
        """Whether this engine casts ``source`` to ``target`` with a single torch op (then
        blocking would only add work).  Mirrors the dispatch below; a wrong answer costs
        speed, never bits."""
        s, t = source.code, target.code
        if self._native_is_rule(source, target, mode):
            return True
        if self._integer_keeps_low_bits(source, target, mode):
            return True  # x.to(), or x & mask viewed (or narrowed)
        if source.storage_bits <= 16:
            return False  # a gather: an index conversion and index_select
        if target.kind is Kind.BOOL or t in (_T.FLOAT, _T.DOUBLE):
            return True  # x != 0, or torch's own conversion (see to_ieee)
        if s != _T.FLOAT:
            return False
        if t == _T.FLOAT16:
            return True
        if t == _T.BFLOAT16:
            return mode.profile.rules.bfloat16 == "nearest_even"
        plan = _FLOAT8_PLANS.get(_mode_key(target, mode))
        return plan is not None and plan.repair == "none" and plan.torch_nan is None

    # -- sources of 16 bits or fewer ------------------------------------------------------------
    def by_pattern_table(self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
        """One gather from the table of every source pattern, except where torch's ``.to()``
        is the rule: exact widenings and integer -> integer (checked on every pattern by the
        exhaustive tests), which are one pass instead of two."""
        if self._native_is_rule(source, target, mode) and not (
            source.code in _OPAQUE_TO_INDUCTOR and torch.compiler.is_compiling()
        ):
            return self.a.astype(x, target)
        if self._integer_keeps_low_bits(source, target, mode):
            return self.integer_to_integer(x, target)
        mode = mode.effective_for(target)
        table = _device_table("pattern", source, target, mode, x)
        # The index is the storage read as unsigned, widened to int32 (what index_select
        # takes); byte-sized sources have 256-entry tables, so no mask is needed.
        index = self.a.storage(x, source).to(torch.int32)
        return self.a.from_bits(_gather(table, index), target)

    @staticmethod
    def _integer_keeps_low_bits(source: TypeSpec, target: TypeSpec, mode: Mode) -> bool:
        """Integer -> integer by R8's low bits (not from a sub-byte source, whose storage byte
        may hold more than the value; not where the profile saturates sub-byte targets)."""
        return (
            source.is_integer
            and not source.is_sub_byte
            and target.is_integer
            and (not target.is_sub_byte or mode.profile.rules.sub_byte_range == "wrap")
        )

    @staticmethod
    def _native_is_rule(source: TypeSpec, target: TypeSpec, mode: Mode) -> bool:
        """Whether torch's ``.to()`` from a 16-bit-or-narrower ``source`` is the rule."""
        pair = (source.code, target.code)
        if pair in _EXACT_WIDENINGS:
            return True
        if pair in _ROUNDED_ONCE_VIA_FLOAT:
            # Unless the profile truncates to BFLOAT16 (legacy, R12).
            return target.code != _T.BFLOAT16 or mode.profile.rules.bfloat16 == "nearest_even"
        return False

    def class_table(self, target: TypeSpec, mode: Mode, like: Any) -> Any:
        """The FLOAT class table of ``target`` as a device constant (compile-safe)."""
        mode = mode.effective_for(target)
        return _device_table("class", _FLOAT, target, mode, like)

    # -- integers -----------------------------------------------------------------------------
    def float_to_integer(self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
        """R7 saturating truncation with torch ops: NaN -> 0 first (``clamp`` keeps NaN and
        ``.to()`` of NaN or of an out-of-range value differs by device), then clamp into the
        range, then truncate.  Sub-byte targets use the shared step."""
        if target.is_sub_byte:
            return super().float_to_integer(x, source, target, mode)
        lo = float(target.int_min)
        limit = float(target.int_max + 1)
        high_is_exact = target.int_max < 2 ** (source.fmt.mantissa_bits + 1)
        high = float(target.int_max) if high_is_exact else _largest_float_below(limit, source)
        # ``x != x`` rather than nan_to_num/isnan: Inductor (torch 2.13, CPU) lowers isnan to a
        # scalar loop inside its vector loop, 15x slower than the rest of the cast.  The clamp
        # takes the infinities to the bounds.
        y = torch.where(x != x, 0.0, x)
        out = self.a.astype(torch.clamp(y, lo, high), target)
        if not high_is_exact:
            # int_max is not a value of the source format: the clamp stopped short of it.
            if target.kind is Kind.UNSIGNED:
                # int_max is all ones: -1 in the signed view (Inductor cannot compile a
                # ``where`` on uint16/32/64 values).
                signed = out.view(_SIGNED[target.bits])
                return torch.where(x >= limit, -1, signed).view(out.dtype)
            out = torch.where(x >= limit, target.int_max, out)
        return out

    def integer_to_integer(self, x: Any, target: TypeSpec) -> Any:
        """R8, as the shared step; to a sub-byte type the masked value goes straight to
        :meth:`TorchAdapter.from_bits` (a view when the source is a byte wide)."""
        if target.is_sub_byte:
            return self.a.from_bits(x & ((1 << target.bits) - 1), target)
        return self.a.astype(x, target)

    def clip_to_range(self, x: Any, source: TypeSpec, target: TypeSpec) -> Any:
        """The shared step, but torch has no ``clamp`` on uint32/uint64: their values are
        clipped on the int64 view (UINT32 widened first), where those beyond 2**63 read as
        negative and go to the top."""
        if source.kind is not Kind.UNSIGNED or source.bits <= 16:
            return super().clip_to_range(x, source, target)
        signed = x.view(torch.int64) if source.bits == 64 else x.to(torch.int64)
        top = target.int_max
        return torch.where(signed < 0, top, torch.clamp(signed, 0, top))

    def is_negative(self, x: Any, source: TypeSpec) -> Any:
        if source.kind is Kind.UNSIGNED:  # torch has no ``<`` on uint32/uint64
            return torch.zeros(x.shape, dtype=torch.bool, device=x.device)
        return x < 0

    # -- IEEE targets --------------------------------------------------------------------------
    def to_ieee(self, x: Any, source: TypeSpec, target: TypeSpec) -> Any:
        if target.code == _T.FLOAT16 and source.code != _T.FLOAT:
            # torch converts DOUBLE -> FLOAT16 through FLOAT, rounding twice.  FLOAT rounded
            # to odd (24 bits >= 11 + 2) keeps the single correct rounding.
            odd32 = self.float32_bits(x, source, odd=True).view(torch.float32)
            return odd32.to(torch.float16)
        if target.code == _T.FLOAT and source.code in (_T.INT64, _T.UINT64):
            # torch's INT64/UINT64 -> FLOAT rounds once, to nearest even (checked on ties at
            # every bit position, eager and compiled): one pass instead of the exact sum.
            return self.a.astype(x, target)
        return super().to_ieee(x, source, target)

    def to_bfloat16(self, x: Any, source: TypeSpec, mode: Mode, odd: bool) -> Any:
        if mode.profile.rules.bfloat16 == "truncate":
            bits32 = self.float32_bits(x, source, odd=False)
            upper = bits32 >> 16  # arithmetic shift: the low 16 bits are still the right ones
            is_nan = (bits32 & 0x7FFFFFFF) > 0x7F800000
            # A NaN whose payload lies in the dropped bits would truncate to Inf: force quiet.
            upper = torch.where(is_nan, upper | 0x0040, upper)
            return self.a.from_bits(upper.to(torch.int16), _BFLOAT16)
        # torch's FLOAT -> BFLOAT16 rounds to nearest even and keeps NaN a NaN, on every FLOAT
        # (checked on all 2**32, eager and compiled); the NaN payload is not part of R3.
        return self._float32_value(x, source, odd).to(torch.bfloat16)

    # -- float8 ---------------------------------------------------------------------------------
    def to_small_float(
        self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode, odd: bool
    ) -> Any:
        """float8 targets by torch's own rounding where it is the rule, else the class table.

        torch rounds FLOAT to every float8 format to nearest even, subnormals included
        (checked on all 2**32 FLOATs, eager and compiled); it differs from R4 only in what
        overflow, Inf and NaN become (:data:`_TORCH_FLOAT8`).  Those differences are repaired
        from the spec's own tables (:func:`~castlike.spec.rules.overflow_rule`, the format's
        NaN encoding); a combination this cannot repair in a pass or two takes the table.
        """
        effective = mode.effective_for(target)
        # Plain-value key: torch.compile traces this, and the plans are computed at import
        # (Fraction arithmetic and cached_property cannot be traced).
        plan = _FLOAT8_PLANS.get(
            (
                target.code,
                effective.saturate,
                effective.round_mode.value,
                effective.profile.value,
                effective.inf_to_fnuz_is_nan,
            )
        )
        if plan is None:
            return super().to_small_float(x, source, target, mode, odd)
        value = self._float32_value(x, source, odd)
        dtype = self.a._require(target)
        if plan.repair == "clamp":
            value = torch.clamp(value, -plan.top, plan.top)  # clamp keeps NaN
        out = value.to(dtype)
        if plan.repair == "nan beyond max":
            # torch saturates; beyond the rounding boundary the rule wants NaN, sign kept.
            # Saturated results are +-max, and max | NaN's magnitude bits is NaN's encoding.
            magnitude = value.abs()
            over = magnitude >= plan.boundary if plan.inclusive else magnitude > plan.boundary
            out = (out.view(torch.uint8) | over.view(torch.uint8) * plan.nan_magnitude).view(dtype)
        if plan.torch_nan is not None:
            # E5M2: torch writes NaN as 0x7F|sign, the rule as 0x7E|sign; no other value has
            # those low seven bits, so subtracting one from exactly those bytes repairs them.
            u = out.view(torch.uint8)
            out = (u - ((u & 0x7F) == plan.torch_nan).view(torch.uint8)).view(dtype)
        return out

    def _float32_value(self, x: Any, source: TypeSpec, odd: bool) -> Any:
        """``x`` as a FLOAT tensor carrying the rounding the rules need (to odd or nearest)."""
        if source.code == _T.FLOAT:
            return x
        return self.float32_bits(x, source, odd=odd).view(torch.float32)

    # -- FLOAT bits, rounded to odd -------------------------------------------------------------
    def float32_bits(self, x: Any, source: TypeSpec, *, odd: bool) -> Any:
        """FLOAT bit patterns as ``int32`` (two's complement view): exact, to odd or nearest."""
        code = source.code
        if code == _T.FLOAT:
            return x.view(torch.int32)
        if code in (_T.INT64, _T.UINT64):
            x = self.round_to_odd_double(x, source)
        elif code != _T.DOUBLE:
            x = x.to(torch.float64)  # INT32/UINT32: exact
        if odd:
            return self.round_to_odd_float(x)
        return x.to(torch.float32).view(torch.int32)

    def round_to_odd_float(self, x: Any) -> Any:
        """DOUBLE -> FLOAT bits (``int32``) rounded to odd, as the shared step, in fewer passes.

        ``back`` (the nearest FLOAT, widened) has the sign of ``x``, and for doubles of one
        sign the ``int64`` view orders by magnitude, so "``|back| > |x|``" is one integer
        comparison.  A NaN may compare either way: a quiet FLOAT NaN minus one is still NaN.
        """
        nearest = x.to(torch.float32)
        back = nearest.to(torch.float64).view(torch.int64)
        exact = x.view(torch.int64)
        # Booleans viewed as uint8 (free) join int32 arithmetic in the same pass.
        bits = nearest.view(torch.int32) - (back > exact).view(torch.uint8)  # toward zero
        return bits | (back != exact).view(torch.uint8)

    def round_to_odd_double(self, x: Any, source: TypeSpec) -> Any:
        """INT64/UINT64 -> DOUBLE rounded to odd, as the shared step, on the ``int64`` view
        (torch has no shift on ``uint64``; the high word is masked back to unsigned)."""
        if source.code == _T.UINT64:
            signed = x.view(torch.int64)
            high = (signed >> 32) & 0xFFFFFFFF
        else:
            signed = x
            high = signed >> 32
        low = signed & 0xFFFFFFFF
        a = high.to(torch.float64) * 4294967296.0  # exact
        b = low.to(torch.float64)  # exact
        s = a + b  # rounded to nearest
        bb = s - a  # TwoSum: the exact error of s
        err = (a - (s - bb)) + (b - bb)
        inexact = err != 0
        overshoot = inexact & ((err < 0) == (s > 0))
        bits = s.view(torch.int64) - overshoot.view(torch.uint8)
        return (bits | inexact.view(torch.uint8)).view(torch.float64)

    def float32_class_index(self, bits32: Any) -> Any:
        """Class index of ``int32`` FLOAT bits: ``(bits >> 19) << 1 | sticky`` without the
        sign extension of the arithmetic shift."""
        # sticky = 1 if any of the low 19 bits is set: (low + 0x7FFFF) >> 19, in int32 (an
        # op mixing bool and int32 runs element by element in eager torch).
        sticky = ((bits32 & 0x7FFFF) + 0x7FFFF) >> 19
        return ((bits32 >> 18) & 0x3FFE) | sticky


@dataclass(frozen=True)
class _Native:
    """What torch's ``.to()`` makes of a FLOAT beyond a float8 format's range, of +-Inf, and
    the NaN encoding it writes (sign bit added for signed NaNs)."""

    overflow: Action
    inf: Action
    nan: int


#: torch 2.13's float8 conversions, measured (eager and Inductor, CPU).
_TORCH_FLOAT8: dict[OnnxType, _Native] = {
    _T.FLOAT8E4M3FN: _Native(Action.MAX, Action.MAX, 0x7F),
    _T.FLOAT8E5M2: _Native(Action.INF, Action.INF, 0x7F),
    _T.FLOAT8E4M3FNUZ: _Native(Action.NAN, Action.NAN, 0x80),
    _T.FLOAT8E5M2FNUZ: _Native(Action.NAN, Action.NAN, 0x80),
}


@dataclass(frozen=True)
class _Float8Plan:
    """How to get one float8 target under one mode from torch's ``.to()``: the repair
    ("none", "clamp" to +-``top`` first, or "nan beyond max": NaN where the magnitude passes
    ``boundary``), and torch's NaN byte to rewrite (None when it is already the rule's)."""

    repair: str
    top: float
    boundary: float
    inclusive: bool
    nan_magnitude: int
    torch_nan: int | None


def _float8_plan(target: TypeSpec, mode: Mode) -> _Float8Plan | None:
    """The plan for ``target`` under ``mode`` from R4's tables, or None (use the class table)."""
    native = _TORCH_FLOAT8.get(_T(target.code))
    fmt = target.fmt
    nan = fmt.nan_bits()
    if target.code == _T.FLOAT8E5M2:
        nan = mode.profile.rules.float8e5m2_nan  # R12: 0x7F in the legacy profile
    if native is None or nan is None or nan not in (native.nan, native.nan - 1):
        return None
    rule = overflow_rule(target, mode)
    wanted = (rule.overflow, rule.inf)
    if wanted == (native.overflow, native.inf):
        repair = "none"
    elif wanted == (Action.MAX, Action.MAX):
        repair = "clamp"
    elif wanted == (Action.NAN, Action.NAN) and native.inf is Action.MAX:
        repair = "nan beyond max"
    else:
        return None
    # The magnitude from which a value rounds (to nearest even) above max; the boundary itself
    # does when max's last mantissa bit is odd.
    max_bits = fmt.max_bits & ~fmt.sign_mask
    ulp = fmt.magnitude_of(max_bits) - fmt.magnitude_of(max_bits - 1)
    return _Float8Plan(
        repair=repair,
        top=float(fmt.max_value),
        boundary=float(fmt.max_value + ulp / 2),
        inclusive=bool(max_bits & 1),
        nan_magnitude=nan & ~fmt.sign_mask,
        torch_nan=None if nan == native.nan else native.nan,
    )


def _mode_key(target: TypeSpec, mode: Mode) -> tuple[int, bool, str, str, bool]:
    m = mode.effective_for(target)
    return (target.code, m.saturate, m.round_mode.value, m.profile.value, m.inf_to_fnuz_is_nan)


#: Every float8 target under every effective mode, by plain values (see to_small_float).
_FLOAT8_PLANS: dict[tuple[int, bool, str, str, bool], _Float8Plan | None] = {
    _mode_key(TYPES[t], m): _float8_plan(TYPES[t], m.effective_for(TYPES[t]))
    for t in _TORCH_FLOAT8
    for m in (
        Mode(saturate, round_mode, profile, fnuz)
        for saturate in (True, False)
        for round_mode in RoundMode
        for profile in Profile
        for fnuz in (True, False)
    )
}


def _widens_exactly(source: TypeSpec, target: TypeSpec) -> bool:
    """Whether every value of ``source`` (16 bits or fewer) is a value of the IEEE or integer
    ``target``, so that torch's ``.to()`` is the rule (NaN to a NaN, +-Inf to +-Inf)."""
    if source.is_sub_byte or target.is_sub_byte or source.code == target.code:
        return False
    if target.is_float:
        fmt = target.fmt
        if fmt.special is not Special.IEEE or target.bits < 16:
            return False
        exact_ints = 1 << (fmt.mantissa_bits + 1)
        if source.kind is Kind.BOOL:
            return True
        if source.is_integer:
            return max(-source.int_min, source.int_max) <= exact_ints
        s = source.fmt
        if source.bits <= 8:
            # Exact, but torch converts most float8 formats one element at a time (up to 10x
            # slower than the 256-entry gather, measured): float8 sources keep the table.
            return False
        return (
            s.mantissa_bits <= fmt.mantissa_bits
            and s.max_value <= fmt.max_value
            and s.min_subnormal >= fmt.min_subnormal
        )
    return target.is_integer and source.kind is Kind.BOOL


#: FLOAT16 <-> BFLOAT16: torch widens to FLOAT (exactly) and rounds once to nearest even,
#: which is R3 (checked on every pattern by the exhaustive tests).
_ROUNDED_ONCE_VIA_FLOAT: frozenset[tuple[int, int]] = frozenset(
    {(_T.FLOAT16.value, _T.BFLOAT16.value), (_T.BFLOAT16.value, _T.FLOAT16.value)}
)

#: (source code, target code) pairs of 16-bit-or-narrower sources that torch's ``.to()``
#: converts exactly (computed at import: the test above cannot be traced by Dynamo).
_EXACT_WIDENINGS: frozenset[tuple[int, int]] = frozenset(
    (s.code, t.code)
    for s in TYPES.values()
    for t in TYPES.values()
    if s.is_numeric and t.is_numeric and s.storage_bits <= 16 and _widens_exactly(s, t)
)


#: The one torch adapter (adapters hold no per-call state).
ADAPTER = TorchAdapter()
