"""PyTorch backend: the primitives of torch tensors on any device, eager or under
``torch.compile``.

Imported only when the caller passes a torch tensor (or asks for this backend by name), so
castlike never imports torch on its own.

What torch can hold (rule R10): every numeric ONNX type except FLOAT4E2M1 (torch only has
the packed ``float4_e2m1fn_x2``) and FLOAT6E2M3/FLOAT6E3M2 (no dtype).  The one-byte "shell"
dtypes ``torch.int4``, ``torch.uint4``, ``torch.int2`` and ``torch.uint2`` hold the sub-byte
types one element per byte, low bits significant, like ml_dtypes; torch implements almost no
operation on them, so castlike computes in ``uint8`` and reinterprets with ``view``.

The rules are the shared engine's (:mod:`castlike._engine`).  What this file supplies, because
torch 2.13

* implements no arithmetic, shift or ordering on ``uint16``/``uint32``/``uint64`` (only
  ``&``, ``|``, ``==``, ``!=``, conversions and ``where``): :meth:`TorchAdapter.int_bits` is
  the signed view of the same width (``unsigned_arithmetic = False``), and ``where``/``clip``
  on those dtypes go through it;
* has no ``take``/``index_select`` for ``uint16``+ tables: gathers use ``index_select`` on a
  signed or ``uint8`` view;
* rounds DOUBLE -> FLOAT16 through FLOAT, twice: not declared, so the engine goes through
  FLOAT rounded to odd;
* rounds FLOAT to every float8 format to nearest even, but differs from R4 in what overflow,
  Inf and NaN become (:data:`FLOAT8_SPECIALS`, measured): the engine repairs them from the
  spec's tables (:mod:`castlike.spec.float8_repairs`);
* needs its own custom operators and a repair under ``torch.compile``
  (:mod:`castlike.backends._torch_compile`).

torch's own ``.to()`` is used where it equals the rule (:data:`LIBRARY_PAIRS`, checked against
the oracle by the tests, and for FLOAT -> float8/BFLOAT16 on all 2**32 FLOATs by
``benchmarks/bench_torch.py --verify-native``).  Eager CPU tensors go to castlike's native
kernels through zero-copy views.  Measurements behind each choice are in ``docs/torch.rst``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import array_api_compat.torch as xp_torch
import numpy as np
import torch

from .. import _fastpath
from .._adapter import Adapter
from .._engine import Engine
from .._native.routes import covers
from ..errors import BackendTypeError
from ..spec.float8_repairs import LibrarySpecials, plans
from ..spec.packing import layout_of
from ..spec.route import Family, Route
from ..spec.rules import Action, Mode
from ..spec.types import TYPES, Kind, OnnxType, Special, TypeSpec, spec_of
from . import _torch_compile as compiled
from ._numpy_dtypes import NUMPY_DTYPES, onnx_type_of_numpy_dtype
from ._torch_dtypes import (
    BY_CODE,
    BY_DTYPE,
    DTYPE_NAMES,
    GATHER,
    NOT_IN_TORCH,
    PACKED_DTYPE_OF,
    PACKED_DTYPES,
    SIGNED,
    TORCH_DTYPES,
    UINT,
)

if TYPE_CHECKING:
    from ..spec.plan import Plan

__all__ = [
    "ADAPTER",
    "FLOAT8_SPECIALS",
    "LIBRARY_PAIRS",
    "TORCH_DTYPES",
    "TorchAdapter",
    "TorchEngine",
]

_T = OnnxType
_FLOAT = spec_of(_T.FLOAT)
_BFLOAT16 = spec_of(_T.BFLOAT16)
#: Unsigned dtypes torch computes (almost) nothing on: their bit width.
_NO_ARITHMETIC = {torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}

#: Whether Inductor's CPU code converts to the float8 types in vectors: where torch's own CPU
#: dispatch runs AVX-512 (the vector float8 conversions of its ``at::vec``).  Below it, a
#: compiled ``.to(float8)`` converted one element at a time: 6.1-6.6 ms at 10**6 on an AVX2-only
#: AMD EPYC (Zen 3), against the eager ``.to``'s 1.0 and castlike's operator's 0.7.
_INDUCTOR_FLOAT8_IN_VECTORS = torch.backends.cpu.get_cpu_capability() == "AVX512"

#: The half -> FLOAT widenings and FLOAT16 -> DOUBLE, whose ``.to()`` on the CPU keeps a NaN's
#: sign and payload, eagerly and in Inductor's code, both its vector loops (F16C's
#: ``vcvtph2ps``; BFLOAT16's shift) and its scalar ones (c10's conversions): R3's NaN is then
#: that NaN made quiet, which adding zero does (x86's SSE and AVX quiet a NaN operand and keep
#: its sign and payload).  Under torch.compile a CPU tensor's cast is that one ``to`` and a
#: select of ``y + 0`` where ``y`` is NaN (:func:`_to_quieted`), which Inductor fuses into one
#: vector loop, with the ops around it: at 10**6, one thread, FLOAT16 -> FLOAT 0.191 ms
#: against the compiled ``.to``'s 0.189, where the operator was 1.5x it (docs/torch.rst).
#: Every FLOAT16 value is a normal FLOAT (and DOUBLE), a BFLOAT16 value is the FLOAT of the
#: same bits, and only NaN goes through the addition: a caller's flush-to-zero changes
#: nothing.  Not FLOAT -> FLOAT16 (c10's scalar conversion writes 0x7E00 for every NaN), not
#: BFLOAT16 -> DOUBLE (its subnormals reach DOUBLE through FLOAT's, which flush-to-zero would
#: flush).  The tests check every half pattern, in vector and in scalar code, with
#: flush-to-zero set and not.
_CPU_TO_KEEPS_NAN = frozenset(
    {(_T.FLOAT16, _T.FLOAT), (_T.BFLOAT16, _T.FLOAT), (_T.FLOAT16, _T.DOUBLE)}
)


# -- what torch's own conversions do (declared; the tests check them) --------------------------


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


def _library_pairs() -> frozenset[tuple[int, int]]:
    """Where torch's ``.to()`` is the rule (``Adapter.library_pairs``): the exact widenings of
    sources of 16 bits or fewer; FLOAT16 <-> BFLOAT16 (torch widens to FLOAT, exactly, and
    rounds once to nearest even); integer -> integer from a whole-byte source (R8's low bits:
    ``.to()``, or the masked value viewed as a sub-byte type); FLOAT -> FLOAT16 and BFLOAT16,
    INT64/UINT64 -> FLOAT (one rounding to nearest even, checked on ties at every bit
    position, eager and compiled)."""
    numeric = [t for t in TYPES.values() if t.is_numeric]
    pairs = {
        (s.code, t.code)
        for s in numeric
        for t in numeric
        if s.storage_bits <= 16 and _widens_exactly(s, t)
    }
    pairs |= {
        (s.code, t.code)
        for s in numeric
        for t in numeric
        if s.is_integer and not s.is_sub_byte and t.is_integer
    }
    pairs |= {(_T.FLOAT16, _T.BFLOAT16), (_T.BFLOAT16, _T.FLOAT16)}
    pairs |= {(_T.FLOAT, _T.FLOAT16), (_T.FLOAT, _T.BFLOAT16)}
    pairs |= {(_T.INT64, _T.FLOAT), (_T.UINT64, _T.FLOAT)}
    return frozenset((int(s), int(t)) for s, t in pairs)


#: See :func:`_library_pairs`.
LIBRARY_PAIRS = _library_pairs()

#: torch's float8 conversions of FLOAT, measured: rounding to nearest even, subnormals
#: included (torch 2.13, eager and Inductor, CPU: on all 2**32 FLOATs), and these specials.
#: FLOAT8E4M3FN's overflow and Inf differ between versions and devices: torch 2.13 saturates
#: (eager and Inductor, CPU); torch 2.11 writes NaN eagerly, on the CPU and on CUDA (an H200),
#: so neither is declared, and every mode is repaired whatever torch does.
FLOAT8_SPECIALS: dict[OnnxType, LibrarySpecials] = {
    _T.FLOAT8E4M3FN: LibrarySpecials(None, None, 0x7F),
    _T.FLOAT8E5M2: LibrarySpecials(Action.INF, Action.INF, 0x7F),
    _T.FLOAT8E4M3FNUZ: LibrarySpecials(Action.NAN, Action.NAN, 0x80),
    _T.FLOAT8E5M2FNUZ: LibrarySpecials(Action.NAN, Action.NAN, 0x80),
}


def _gather(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for an int32/int64 ``index`` of any shape (one pass, any device)."""
    return torch.index_select(table, 0, index.reshape(-1)).reshape(index.shape)


def _signed_value(value: Any, bits: int) -> Any:
    """A Python int as the signed view of ``bits`` width reads its two's complement."""
    if isinstance(value, int) and value >= 1 << (bits - 1):
        return value - (1 << bits)
    return value


# -- the adapter --------------------------------------------------------------------------------


class TorchAdapter(Adapter):
    """torch tensors: the dtypes above, on the tensor's own device."""

    packs = True

    name = "torch"
    xp = xp_torch
    library_pairs = LIBRARY_PAIRS
    unsigned_arithmetic = False
    float8_plans = plans(FLOAT8_SPECIALS)

    def __init__(self) -> None:
        self._engine: TorchEngine | None = None

    # -- types -----------------------------------------------------------------------------
    def library_dtype(self, t: TypeSpec) -> torch.dtype | None:
        return BY_CODE.get(t.code)

    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        if isinstance(dtype, torch.dtype):
            return BY_DTYPE.get(dtype)
        return None

    def cannot_hold_hint(self, t: TypeSpec) -> str:
        hint = NOT_IN_TORCH.get(_T(t.code))
        if hint is not None:
            return hint
        name = DTYPE_NAMES.get(_T(t.code), "?")
        return (
            f"this torch ({torch.__version__}) has no torch.{name}; upgrade torch, or cast a "
            f"NumPy array instead (castlike.cast(x.cpu().numpy(), {t.name!r}))"
        )

    def packed_type_of(self, dtype: Any) -> OnnxType | None:
        return PACKED_DTYPES.get(dtype) if isinstance(dtype, torch.dtype) else None

    def packed_source(self, x: Any) -> tuple[Any, TypeSpec, int] | None:
        found = PACKED_DTYPES.get(x.dtype)
        if found is None:
            return None
        if x.ndim == 0:
            raise BackendTypeError(
                f"torch: a 0-d {x.dtype} tensor has no last axis to unpack along; pass x.reshape(1)"
            )
        # float4_e2m1fn_x2: two elements per byte along the last axis, the first in the low
        # nibble (ONNX's order), so its bytes are the packed rows as they stand.
        return x.view(torch.uint8), TYPES[found], 2 * x.shape[-1]

    def holds_packed(self, t: TypeSpec) -> bool:
        # Bit patterns of every sub-byte type are computed in uint8 shells (see shell_dtype).
        return True

    def packed_result(self, data: Any, t: TypeSpec) -> Any:
        dtype = PACKED_DTYPE_OF.get(t.code)  # type: ignore[call-overload]  # a code finds it
        return data if dtype is None else data.view(dtype)

    def shell_dtype(self, t: TypeSpec) -> torch.dtype:
        """The dtype that holds ``t`` while a cast computes it: its own, or, for the sub-byte
        types torch has no one-per-byte dtype for (FLOAT4E2M1, FLOAT6*), ``uint8`` holding
        the bit patterns, which only a packed cast hands out (packed)."""
        if self.library_dtype(t) is None and not t.is_sub_byte:
            return self._require(t)  # the error, with its hint
        return compiled.shell_dtype(t)

    def _require(self, t: TypeSpec) -> torch.dtype:
        dtype = self.library_dtype(t)
        if dtype is None:
            raise BackendTypeError(f"torch cannot hold {t.name}; {self.cannot_hold_hint(t)}")
        return dtype

    # -- primitives --------------------------------------------------------------------------
    def uint(self, bits: int) -> torch.dtype:
        return UINT[bits]

    def bits(self, x: Any, t: TypeSpec) -> torch.Tensor:
        """Unsigned view of the storage (a ``uint16``+ result is for views and gathers only:
        torch does no arithmetic on it; :meth:`int_bits` is the view to compute on)."""
        u = self.storage(x, t)
        if t.is_sub_byte:
            return u & ((1 << t.bits) - 1)
        if t.kind is Kind.BOOL:  # R8: a byte that is not 0 or 1 (foreign memory) is True
            return (u != 0).view(torch.uint8)
        return u

    def int_bits(self, x: Any, t: TypeSpec) -> torch.Tensor:
        """The signed view of the storage (``uint8`` for one byte, which torch computes on)."""
        return x.view(GATHER[t.storage_bits])

    def storage(self, x: Any, t: TypeSpec) -> torch.Tensor:
        """The storage of ``x`` (type ``t``) as unsigned integers of its width, unmasked.

        A view, except for the types Inductor cannot compile under ``torch.compile``: an
        opaque operator copies the bytes instead.
        """
        found = compiled.bytes_of(x, t)
        return x.view(UINT[t.storage_bits]) if found is None else found

    def from_bits(self, u: Any, t: TypeSpec) -> torch.Tensor:
        """Reinterpret integers of ``t``'s storage width as ``t``; a wider integer array is
        narrowed first (keeping the low bits).  Under ``torch.compile`` the types Inductor
        cannot compile are a copy by an opaque operator, as in :meth:`storage`."""
        u = self.narrow(u, t.storage_bits)
        found = compiled.bytes_as(u, t)
        return u.view(self.shell_dtype(t)) if found is None else found

    def narrow(self, u: Any, bits: int) -> torch.Tensor:
        if u.dtype.itemsize * 8 == bits:
            return u
        return u.to(GATHER[bits])

    def flag(self, mask: Any, like: Any) -> torch.Tensor:
        # A bool tensor's bytes are 0/1: a free view, which joins int arithmetic in one pass.
        return mask.view(torch.uint8)

    def where(self, cond: Any, a: Any, b: Any) -> torch.Tensor:
        """``torch.where``; on uint16/32/64 values through the signed view (Inductor cannot
        compile a ``where`` on them)."""
        like = b if isinstance(b, torch.Tensor) else a
        bits = _NO_ARITHMETIC.get(like.dtype)
        if bits is None:
            return torch.where(cond, a, b)
        signed = SIGNED[bits]
        a = a.view(signed) if isinstance(a, torch.Tensor) else _signed_value(a, bits)
        b = b.view(signed) if isinstance(b, torch.Tensor) else _signed_value(b, bits)
        return torch.where(cond, a, b).view(like.dtype)

    def clip(self, x: Any, low: float, high: float) -> torch.Tensor:
        """``torch.clamp`` (which keeps NaN; compiled, the NaN is kept by a ``where``);
        uint32/uint64 (which it cannot clamp) on the int64 view, where those beyond 2**63 read
        as negative and go to ``high``."""
        bits = _NO_ARITHMETIC.get(x.dtype, 0)
        if bits < 32:
            clipped = torch.clamp(x, low, high)
            if x.is_floating_point() and torch.compiler.is_compiling():
                # Inductor's CPU clamp of a NaN gives a NaN of another sign (measured, torch
                # 2.13: +NaN -> -NaN): the NaN itself is kept instead.
                return torch.where(x != x, x, clipped)
            return clipped
        signed = x.view(torch.int64) if bits == 64 else x.to(torch.int64)
        clipped = torch.where(signed < 0, int(high), torch.clamp(signed, int(low), int(high)))
        return clipped.view(x.dtype) if bits == 64 else clipped.to(x.dtype)

    def astype(self, x: Any, t: TypeSpec) -> torch.Tensor:
        if t.is_sub_byte:  # torch has no conversions to the shell dtypes
            raise TypeError(f"torch has no conversion to {t.name}; use from_bits")
        # copy=True: a cast to the tensor's own dtype must not hand back the input itself.
        return x.to(self._require(t), copy=True)

    def device_table(self, table: np.ndarray, like: Any) -> torch.Tensor:
        """A host table on ``like``'s device (a copy; the engine's tables come from
        :meth:`pattern_table` and :meth:`class_table`, cached and compile-safe)."""
        contiguous = np.ascontiguousarray(table)
        gather = GATHER[contiguous.dtype.itemsize * 8]
        return torch.from_numpy(contiguous.copy()).view(gather).to(like.device)

    def pattern_table(self, source: TypeSpec, target: TypeSpec, mode: Mode, like: Any) -> Any:
        return compiled.device_table("pattern", source, target, mode, like)

    def class_table(self, target: TypeSpec, mode: Mode, like: Any) -> Any:
        return compiled.device_table("class", _FLOAT, target, mode, like)

    def pattern_index(self, x: Any, t: TypeSpec) -> torch.Tensor:
        # The storage read as unsigned, widened to int32 (what index_select takes); byte-sized
        # sources have 256-entry tables, so no mask is needed.
        return self.storage(x, t).to(torch.int32)

    def take(self, table: Any, index: Any) -> torch.Tensor:
        if table.dtype not in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
            table = table.view(GATHER[table.dtype.itemsize * 8])
        if index.dtype not in (torch.int32, torch.int64):
            index = index.to(torch.int32)
        return _gather(table, index)

    # -- moving data -------------------------------------------------------------------------
    def from_numpy(self, array: np.ndarray, like: Any = None) -> torch.Tensor:
        """A NumPy array of a numeric ONNX type as a tensor (a copy) on ``like``'s device."""
        array = np.asarray(array)
        found = onnx_type_of_numpy_dtype(array.dtype)
        if found is None or found == _T.STRING:
            raise BackendTypeError(f"torch cannot hold NumPy arrays of dtype {array.dtype}")
        t = TYPES[found]
        dtype = self._require(t)
        # A C-ordered, machine-byte-order copy that the tensor then owns.
        host = np.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=True)
        tensor = torch.from_numpy(host.view(f"uint{t.storage_bits}")).view(dtype)
        if like is not None:
            tensor = tensor.to(like.device)
        return tensor

    def like_on(self, device: str) -> torch.Tensor:
        """An empty tensor on ``device`` (any name ``torch.device`` takes: "cpu", "cuda:1")."""
        try:
            return torch.empty(0, device=device)
        except (RuntimeError, AssertionError, ValueError) as exc:  # unknown, or not built in
            raise ValueError(f"torch cannot place a tensor on {device!r}: {exc}") from None

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
        host = _materialized(x.detach()).view(UINT[t.storage_bits]).cpu().numpy()
        return host.view(NUMPY_DTYPES[found])

    # -- the engine ---------------------------------------------------------------------------
    def engine(self) -> TorchEngine:
        if self._engine is None:
            self._engine = TorchEngine(self)
        return self._engine

    def repeat_cast(self, plan: Any, *, packed: bool = False) -> Any:
        """The native kernel's run on a CPU tensor, for the frontend's repeat calls (keyed by
        dtype and layout); it declines (None) where :meth:`TorchEngine.cast` would
        not run the kernel: a nested or expanded tensor, or the kernels switched off since."""
        source, target = plan.source, plan.target
        kernel = compiled.native_kernel(source, target, plan.mode)
        if kernel is None:
            return None
        if packed:
            layout = layout_of(target)
            assert layout is not None
            in_bits = UINT[source.storage_bits]

            def run_packed(x: torch.Tensor) -> torch.Tensor | None:
                # What compiled.run_packed does, with the lookups done once (a repeat call's
                # cost is most of a cast of 10**5 elements).
                if not x.is_cpu or x.layout is not torch.strided or x.is_nested or x.ndim == 0:
                    return None
                if x.is_neg() or x._is_zerotensor():
                    return None  # the full path resolves them
                if not compiled.native_enabled():
                    return None
                out = compiled.run_packing_kernel(kernel, x.detach(), in_bits, layout)
                return self.packed_result(out, target)

            return run_packed
        dtype = self._require(target)
        in_bits, out_bits = UINT[source.storage_bits], UINT[target.storage_bits]

        def declined(x: torch.Tensor) -> torch.Tensor | None:
            """Every tensor the kernel's repeat_tensor() leaves: not contiguous (sliced,
            expanded, channels_last), misaligned, nested, lazily negated (x.conj().imag), a
            ZeroTensor, or met under a __torch_function__ mode."""
            # The key held the device (CPU) and the layout (strided: the full path refuses the
            # others, and only what it accepted is remembered).
            if x.is_nested or x.is_neg() or x._is_zerotensor():
                return None  # the full path's error, or its resolved copy
            if not x.is_contiguous() and _distinct(x) is not None:  # (an expanded x is not)
                return None
            x = x.detach() if x.requires_grad else x
            return compiled.run_on_bits(kernel, x, in_bits, dtype, out_bits)

        repeat_tensor = functools.partial(kernel.repeat_tensor, dtype, declined)

        def run(x: torch.Tensor) -> torch.Tensor | None:
            # The usual tensor in one C call: NumPy views of it and of its result cost half
            # a repeat call at 10**3 elements.  The switch is read on every call (tests and
            # users flip CASTLIKE_TORCH_NATIVE at run time).
            return repeat_tensor(x) if compiled.native_enabled() else None

        return run


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


# -- the engine ---------------------------------------------------------------------------------


def _materialized(x: torch.Tensor) -> torch.Tensor:
    """``x`` with the values it stands for in its memory: a tensor with the neg bit
    (``c.conj().imag`` of a complex ``c``) holds their negatives until resolved, and a
    ZeroTensor (autograd's) holds no memory at all.  The kernels and the bit views (which torch
    refuses on a negated tensor) read memory.  Eagerly only: a traced graph has no such bits."""
    if torch.compiler.is_compiling():
        return x
    if x.is_neg():
        x = x.resolve_neg()
    if x._is_zerotensor():
        x = torch.zeros(x.shape, dtype=x.dtype, device=x.device)
    return x


class TorchEngine(Engine):
    """The shared rules, every step of them; what this adds is where they run: the native
    kernels for CPU tensors, large CPU tensors block by block, and an expanded tensor's
    distinct elements only (see :meth:`cast`)."""

    a: TorchAdapter

    #: Elements per block for the several-pass paths on the CPU, eagerly (see :meth:`cast`),
    #: and the size from which they are used (measured: below it, glibc recycles the
    #: temporaries itself and blocks only add per-op overhead).
    BLOCK = 1 << 17
    BLOCKED_FROM = 1 << 21

    def integer_to_integer(self, x: Any, target: TypeSpec) -> Any:
        """R8 as the shared step, a uint16/32/64 tensor through its signed view of the same
        width (the same low bits): CUDA has no ``&`` on those dtypes (torch 2.11 on an H200:
        NotImplementedError "bitwise_and_cuda" for the sub-byte targets)."""
        bits = _NO_ARITHMETIC.get(x.dtype)
        if bits is not None and target.is_sub_byte:
            x = x.view(SIGNED[bits])
        return super().integer_to_integer(x, target)

    def cast(self, x: Any, plan: Plan) -> Any:
        """Cast ``x``; CPU tensors by the native kernels where they cover the cast, large CPU
        tensors on several-pass paths block by block.

        Casts are not differentiable (they round; R3-R8): the result never requires grad,
        whatever the target.  ``detach()`` is a free view and keeps autograd off every step.

        Eagerly, every torch op allocates its result, and a large CPU allocation (beyond
        glibc's 32 MiB mmap threshold) is fresh memory that the kernel must fault in page by
        page (3-6x the op itself at 10**7 elements, measured).  So from
        :attr:`BLOCKED_FROM` elements a path of several ops runs on blocks of :attr:`BLOCK`
        elements whose temporaries the allocator recycles, each block written into the one
        result tensor.  Not under ``torch.compile`` (Inductor fuses the ops into one loop), not
        on other devices (their caching allocators recycle), not for one-op paths.

        An expanded tensor (stride 0 along some axis, as ``expand`` and broadcasting make) is
        cast on its distinct elements, and the result repeated into a new contiguous tensor:
        the kernels' contiguous copy of the input would be as large as the input it stands
        for.  Eagerly; a compiled graph broadcasts inside its own loops.
        """
        _check_strided(x)
        x = _materialized(x.detach())
        if not torch.compiler.is_compiling():
            distinct = _distinct(x)
            if distinct is not None:
                return _repeated(self.cast(distinct, plan), x.shape, plan.target)
        source, target, mode = plan.source, plan.target, plan.mode
        if x.device.type == "cpu" and x.layout is torch.strided:
            if torch.compiler.is_compiling():
                route = self.route(source, target, mode)
                if _cpu_to_keeps_nan(route):
                    return _to_quieted(x, self.a.shell_dtype(target))
                if (
                    compiled.native_enabled()
                    and covers(source, target, mode)
                    and not self._fuses_to_one_loop(route)
                ):
                    return compiled.native_cast(x, source, target, mode)
            else:
                kernel = compiled.native_kernel(source, target, mode)
                if kernel is not None:
                    dtype = self.a.shell_dtype(target)
                    return compiled.run_native(kernel, x, source, dtype, target)
        route = self.route(source, target, mode)
        if (
            torch.compiler.is_compiling()  # first: no guard on the size while tracing
            or x.device.type != "cpu"
            or x.numel() < self.BLOCKED_FROM
            or route.single_op
        ):
            return self.run(x, route)
        n = x.numel()
        # Copies go through same-width integer views: torch has no copy kernel for the shell
        # dtypes (reshape copies a non-contiguous tensor).
        flat = x.view(GATHER[source.storage_bits]).reshape(-1).view(x.dtype)
        out = torch.empty(n, dtype=self.a.shell_dtype(target))
        out_bits = out.view(GATHER[target.storage_bits])
        for start in range(0, n, self.BLOCK):
            block = self.run(flat[start : start + self.BLOCK], route)
            out_bits[start : start + self.BLOCK] = block.view(out_bits.dtype)
        return out.reshape(x.shape)

    def cast_packed(self, x: Any, plan: Plan, *, source_row: int | None, pack: bool) -> Any:
        """CPU tensors: the native kernels' one pass (as :class:`NumpyEngine`) on the tensors'
        memory, eagerly or as one opaque operator of a compiled graph; elsewhere the composed
        path of torch operations."""
        if source_row is None:
            _check_strided(x)
        x = _materialized(x.detach())
        source, target, mode = plan.source, plan.target, plan.mode
        if x.device.type == "cpu":
            if torch.compiler.is_compiling():
                if compiled.native_enabled() and covers(source, target, mode):
                    return compiled.packed_cast(x, source, target, mode, source_row, pack)
            else:
                found = compiled.run_packed(x, source, target, mode, source_row, pack)
                if found is not None:
                    return found
        return super().cast_packed(x, plan, source_row=source_row, pack=pack)

    def pattern_table(self, x: Any, route: Route) -> Any:
        if route.source.kind is Kind.BOOL and (
            torch.compiler.is_compiling() or x.device.type != "cpu"
        ):
            # R8: a bool whose byte is not 0 or 1 (foreign memory) is True.  Eager CPU ops
            # (.to(), the gathers by the byte table) read it so; Inductor's code converts the
            # byte as a number (measured: 2 -> INT16 gave 2), and other devices' kernels are
            # not measured.  A comparison gives a bool of 0/1 first (fused under compile).
            x = x.view(torch.uint8) != 0
        return super().pattern_table(x, route)

    def library(self, x: Any, route: Route) -> Any:
        # The same reading of a BOOL as above, where .to() converts one (a declared pair).
        if route.source.kind is Kind.BOOL and (
            torch.compiler.is_compiling() or x.device.type != "cpu"
        ):
            x = x.view(torch.uint8) != 0
        return super().library(x, route)

    @staticmethod
    def _fuses_to_one_loop(route: Route) -> bool:
        """Whether Inductor compiles this cast's torch ops into one loop worth keeping: the
        one-op routes from FLOAT or DOUBLE into a float (FLOAT8E4M3FN with saturation, the type
        itself) and the exact integer conversions (:func:`_exact_to`), which fuse with the ops
        around the cast.  Everything else the kernels cover goes to the opaque native operator,
        but the widenings of :data:`_CPU_TO_KEEPS_NAN`, which are :func:`_to_quieted` (decided
        before this).  Measured on one thread (docs/torch.rst):

        * The exact integer conversions: Inductor's ``.to`` took 0.19 ms at 10**6 for UINT8 ->
          FLOAT against the operator's 0.21, INT64 -> INT32 0.67 against 0.78, INT32 -> DOUBLE
          0.49 against 0.58 (Zen 4); level at 10**7 (the output's first touch bounds both), and
          ``cast(x * 2)`` fused: INT64 -> INT32 25 against 68 ms at 10**7.

        * FLOAT -> FLOAT8E4M3FN, while it was one ``.to`` (see FLOAT8_SPECIALS): the operator
          was faster alone (0.32 against 0.39 ms at 10**6), but Inductor's loop fused
          ``cast(x * 2)`` into one pass (5.6 against 21.5 ms at 10**7, where the operator's
          input is a fresh 40 MB intermediate).  With the clamp it needs now, the loop took
          0.49 ms against the operator's 0.20 at 10**6, and 4.6 against 23.5 for
          ``cast(x * 2)`` at 10**7 (Zen 4, one thread): the operator carries it, as it does
          every several-op float8 cast.
        * FLOAT -> BOOL (``x != 0``): Inductor's loop took 5.8 ms at 10**6 against the
          operator's 0.31, and 6.4 against 0.64 with ``x * 2`` fused in.
        * The saturating truncations into integers (a where, a clamp, a conversion): 1.7-14x
          the operator's time at 10**6 (FLOAT -> INT8 0.55 against 0.30 ms, UINT16 4.9 against
          0.34, DOUBLE -> INT8 1.41 against 0.46; INT32 and INT64 level).  An earlier machine
          had these level, and they were Inductor's loops then.
        * Float8 targets only where Inductor converts to them in vectors
          (:data:`_INDUCTOR_FLOAT8_IN_VECTORS`): on an AVX2-only CPU its loop for FLOAT ->
          FLOAT8E4M3FN took 6.6 ms at 10**6 against the operator's 0.73, and fused with
          ``x * 2`` it is slower than the two passes as well.
        """
        source, target = route.source, route.target
        if _exact_to(route):
            return True
        if target.is_float and target.bits == 8 and not _INDUCTOR_FLOAT8_IN_VECTORS:
            return False
        return source.is_float and source.bits > 16 and target.is_float and route.single_op


def _cpu_to_keeps_nan(route: Route) -> bool:
    """Whether the route is the library's conversion with R3's NaN step, of a pair whose CPU
    ``.to()`` keeps the NaN's sign and payload (:data:`_CPU_TO_KEEPS_NAN`): a compiled CPU
    tensor's cast is then :func:`_to_quieted`."""
    return (
        route.family is Family.LIBRARY
        and route.nan_policy
        and (route.source.code, route.target.code) in _CPU_TO_KEEPS_NAN
    )


def _exact_to(route: Route) -> bool:
    """Whether the route is torch's ``.to`` of an integer into a type that holds every value
    it converts: an integer kept to its low bits, or a float that holds the whole range
    (:func:`_widens_exactly`).  No rounding happens, so any correct conversion gives the bits,
    whatever the floating-point environment: under ``torch.compile`` such a cast is that
    ``.to``, which Inductor fuses with the ops around it.  Not for uint16/32/64, which torch
    holds with few operations (:data:`_NO_ARITHMETIC`), nor for sub-byte types (a mask), nor
    for BOOL sources (a byte other than 0 and 1 must read as True: see
    :meth:`TorchEngine.library`)."""
    source, target = route.source, route.target
    if not route.single_op or route.nan_policy or source.code == target.code:
        return False
    if not source.is_integer or source.is_sub_byte or target.is_sub_byte:
        return False
    if {compiled.shell_dtype(source), compiled.shell_dtype(target)} & _NO_ARITHMETIC.keys():
        return False
    if route.family is Family.LOW_BITS:
        return route.clip is None and target.is_integer
    return route.family in (Family.LIBRARY, Family.IEEE) and _widens_exactly(source, target)


def _to_quieted(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x.to(dtype)`` with every NaN made quiet by adding zero (:data:`_CPU_TO_KEEPS_NAN`)."""
    y = x.to(dtype)
    return torch.where(y != y, y + 0.0, y)


def _distinct(x: torch.Tensor) -> torch.Tensor | None:
    """An expanded tensor's distinct elements: ``x`` with every axis of stride 0 (and length
    2 or more) narrowed to length 1, a view; None where ``x`` has no such axis."""
    if 0 not in x.stride() or x.numel() <= 1:  # the usual case, decided by one tuple search
        return None
    if not any(stride == 0 and n > 1 for stride, n in zip(x.stride(), x.shape, strict=True)):
        return None
    return x[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in x.stride())]


def _repeated(cast: torch.Tensor, shape: torch.Size, target: TypeSpec) -> torch.Tensor:
    """The cast of :func:`_distinct`'s elements repeated to ``shape``, a new contiguous tensor
    (as ``.to()`` of an expanded tensor gives).  Copied through a same-width integer view:
    torch has no copy kernel for the shell dtypes."""
    out = torch.empty(shape, dtype=cast.dtype, device=cast.device)
    gather = GATHER[target.storage_bits]
    out.view(gather).copy_(cast.view(gather).expand(shape))
    return out


#: Under torch.compile, a cast that is torch's ``.to``: the result's dtype, and whether its NaNs
#: are made quiet after it (:func:`_to_quieted`, for :data:`_CPU_TO_KEEPS_NAN`; else the plain
#: ``.to`` of :func:`_exact_to`).
ToArgs = tuple[torch.dtype, bool]


@torch.compiler.assume_constant_result
def _compiled_signature(
    dtype: torch.dtype, to: Any, options: tuple[Any, ...]
) -> compiled.OperatorArgs | ToArgs | None:
    """The arguments of ``castlike::native_cast`` for a cast of a CPU tensor of ``dtype`` to
    ``to`` with ``options`` (those of :func:`castlike.cast`), where the full path would take
    that operator under torch.compile; :data:`ToArgs` where the cast is torch's ``.to``
    (:func:`_to_quieted` or :func:`_exact_to`); None elsewhere.

    Dynamo runs this once per (dtype, to, options), outside the trace, and keeps the result as
    a constant: the arguments' checks, the plan and the route are then none of the compiled
    function's business, and it guards on none of the module state they read (about 600
    guards, checked before every call, when the trace goes through them).  Bad arguments give
    None: the full path then meets them, and raises its own errors as it always has (so the
    checks here need not come in the full path's order).
    """
    try:
        return _native_signature(dtype, to, options)
    except Exception:  # any bad argument: the full path meets it and raises as it always has
        return None


def _native_signature(
    dtype: torch.dtype, to: Any, options: tuple[Any, ...]
) -> compiled.OperatorArgs | ToArgs | None:
    # This runs while Dynamo traces a function that may read the frontend's caches too (which
    # objects are arrays, their namespaces): it reads the types without them, because an entry
    # added from here breaks the guards Dynamo builds on those dicts.
    from .. import _frontend
    from ..spec.opsets import Op
    from ..spec.plan import resolve

    saturate, round_mode, opset, profile, errors, packed = options
    _frontend._check_packed(packed)
    _frontend._check_errors(errors)
    if packed or not compiled.native_enabled():
        return None
    if ADAPTER.packed_type_of(dtype) is not None:  # an x2 source: its rows unpack
        return None
    source_type = ADAPTER.onnx_type_of(dtype)
    if isinstance(to, torch.dtype):
        if ADAPTER.packed_type_of(to) is not None:  # an x2 target asks for a packed result
            return None
        target_type = ADAPTER.onnx_type_of(to)
        target = None if target_type is None else TYPES[target_type]
    else:  # a name or a code (_compiled_cast lets nothing else through)
        target = _frontend.resolve_type(to)
    if source_type is None or target is None:
        return None
    source = TYPES[source_type]
    plan = resolve(
        Op.CAST,
        source,
        target,
        saturate=saturate,
        round_mode=round_mode,
        opset=opset,
        profile=profile,
    )
    _frontend._check_backend_holds(ADAPTER, plan, packed_source=False, packed_target=False)
    if OnnxType.STRING in (source.code, target.code):
        return None
    engine = ADAPTER.engine()
    route = engine.route(source, target, plan.mode)
    quiet_nan = _cpu_to_keeps_nan(route)
    if quiet_nan or _exact_to(route):
        return (ADAPTER.shell_dtype(target), quiet_nan)
    if not covers(source, target, plan.mode) or engine._fuses_to_one_loop(route):
        return None
    return compiled.operator_args(source, target, plan.mode.effective_for(target))


def _compiled_cast(x: Any, to: Any, options: tuple[Any, ...]) -> Any:
    """Under torch.compile: a CPU tensor's cast as one ``castlike::native_cast`` or as torch's
    ``.to`` (:data:`ToArgs`), decided by :func:`_compiled_signature` outside the trace; None (the
    full path) for anything else."""
    if type(to) not in (str, int, torch.dtype):
        return None
    if not all(type(o) in (str, int, bool, type(None)) for o in options):
        return None
    if x.device.type != "cpu" or x.layout is not torch.strided or x.is_nested:
        return None
    signature = _compiled_signature(x.dtype, to, options)
    if signature is None:
        return None
    if len(signature) == 2:  # a ToArgs
        dtype, quiet_nan = signature
        return _to_quieted(x.detach(), dtype) if quiet_nan else x.detach().to(dtype)
    return compiled.native_cast_of_args(x.detach(), signature)


#: The one torch adapter (adapters hold no per-call state).
ADAPTER = TorchAdapter()
# Its engine now, not on first use: a first use inside torch.compile can come from
# _compiled_signature, which runs outside the trace, and an engine set there while Dynamo
# traces code that reads the attribute too breaks the guard Dynamo builds on it.
ADAPTER.engine()
_fastpath.take_tensors(torch.Tensor, torch.compiler.is_compiling, _compiled_cast, torch.dtype)
