"""The vectorised rules, written once against an :class:`~castlike.backends._base.Adapter`.

Every backend runs this code (a backend may override a step where its library needs it, never
the rules).  The shape of the algorithm:

* A source of 16 bits or fewer is cast by one gather from
  :func:`~castlike.spec.tables.pattern_table`.
* A wide source (FLOAT, DOUBLE, INT32, UINT32, INT64, UINT64) goes by target kind:

  - BOOL: ``x != 0``;
  - integers: truncation with saturation (float sources, R7) or low bits (integer sources, R8);
  - FLOAT, DOUBLE, FLOAT16: the library's conversion, fed with a value that already carries
    the single correct rounding (64-bit integers are first rounded to odd into DOUBLE);
  - BFLOAT16 and the 8-bit-or-smaller floats: the value is brought to FLOAT bits *rounded to
    odd* (which keeps enough information for one correct rounding to any format of 13 bits or
    fewer of precision), then rounded by bit arithmetic (BFLOAT16) or by the FLOAT class
    table (float8, float4, float6, FLOAT8E8M0).

Rounding to odd: truncate, then set the last bit if anything was discarded.  Rounding a value
to odd at p + 2 or more bits and then to nearest at p bits equals rounding it once to p bits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec.rules import ROUNDED_VIA_FLOAT_TARGETS, WIDE_SOURCES, Mode
from .spec.tables import FLOAT32_CLASS_BITS, float32_class_table, pattern_table
from .spec.types import Kind, OnnxType, TypeSpec, spec_of

if TYPE_CHECKING:
    from .backends._base import Adapter
    from .spec.plan import Plan

__all__ = ["Engine"]

_T = OnnxType
_FLOAT = spec_of(_T.FLOAT)
_DOUBLE = spec_of(_T.DOUBLE)
_FLOAT16 = spec_of(_T.FLOAT16)
_BFLOAT16 = spec_of(_T.BFLOAT16)
_UINT8 = spec_of(_T.UINT8)
_UINT16 = spec_of(_T.UINT16)
_UINT32 = spec_of(_T.UINT32)
_UINT64 = spec_of(_T.UINT64)
_STICKY_MASK = (1 << FLOAT32_CLASS_BITS) - 1


class Engine:
    """Rules R3-R8 on arrays of one library."""

    def __init__(self, adapter: Adapter) -> None:
        self.a = adapter
        self.xp = adapter.xp

    # -- entry point -----------------------------------------------------------------------
    def cast(self, x: Any, plan: Plan) -> Any:
        """Cast ``x`` (whose type is ``plan.source``) as ``plan`` says."""
        source, target, mode = plan.source, plan.target, plan.mode
        if source.storage_bits <= 16:
            return self.by_pattern_table(x, source, target, mode)
        return self.from_wide(x, source, target, mode)

    def by_pattern_table(self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
        """One gather from the table of every source pattern."""
        table = self.a.device_table(pattern_table(source, target, mode.effective_for(target)), x)
        return self.a.from_bits(self.a.take(table, self.a.bits(x, source)), target)

    def from_wide(self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
        """Cast from FLOAT, DOUBLE, INT32, UINT32, INT64 or UINT64."""
        if target.kind is Kind.BOOL:
            return self.nonzero(x, source)
        if target.is_integer:
            if target.is_sub_byte and mode.profile.rules.sub_byte_range == "saturate":
                x = self.clip_to_range(x, source, target)
            if source.is_float:
                return self.float_to_integer(x, source, target, mode)
            return self.integer_to_integer(x, target)
        t = _T(target.code)
        if t in (_T.FLOAT, _T.DOUBLE, _T.FLOAT16):
            return self.to_ieee(x, source, target)
        odd = self.rounds_to_odd(source, target, mode)
        if t is _T.BFLOAT16:
            return self.to_bfloat16(x, source, mode, odd)
        return self.to_small_float(x, source, target, mode, odd)

    def to_small_float(
        self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode, odd: bool
    ) -> Any:
        """float8, float4, float6 and FLOAT8E8M0 targets: FLOAT bits, then the class table."""
        t = _T(target.code)
        # FLOAT8E8M0 judges range on x itself (R6): rounded to odd, every DOUBLE beyond 2**127
        # stays beyond it (those beyond FLOAT's range become FLOAT's max), so no special case.
        bits32 = self.float32_bits(x, source, odd=odd)
        out = self.a.take(self.class_table(target, mode, x), self.float32_class_index(bits32))
        if t is _T.FLOAT8E8M0 and not odd and source.code != _T.FLOAT:
            # R6 [castlike]: x < 0 -> NaN in every profile, even when x rounded to -0.0 in FLOAT.
            out = self.xp.where(
                self.is_negative(x, source), self.xp.asarray(0xFF, dtype=out.dtype), out
            )
        return self.a.from_bits(out, target)

    def class_table(self, target: TypeSpec, mode: Mode, like: Any) -> Any:
        """The FLOAT class table of ``target`` on ``like``'s device.  A step, so that a backend
        can supply its cached copy where the host-side construction must not run (torch.compile
        traces this code)."""
        return self.a.device_table(float32_class_table(target, mode.effective_for(target)), like)

    def nonzero(self, x: Any, source: TypeSpec) -> Any:
        """``x != 0`` for a wide source (NaN is nonzero).  A step, so that a backend whose
        float comparisons treat subnormals as zero can compare bits instead."""
        return x != 0

    def is_negative(self, x: Any, source: TypeSpec) -> Any:
        """``x < 0`` for a wide source (False for -0 and NaN); a step, as :meth:`nonzero`."""
        return x < 0

    @staticmethod
    def rounds_to_odd(source: TypeSpec, target: TypeSpec, mode: Mode) -> bool:
        """False where the profile rounds a wide source to nearest FLOAT first (R12)."""
        return not (
            mode.profile.rules.wide_sources_via_float
            and source.code in WIDE_SOURCES
            and _T(target.code) in ROUNDED_VIA_FLOAT_TARGETS
        )

    # -- integers ----------------------------------------------------------------------------
    def float_to_integer(self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
        """R7: FLOAT/DOUBLE -> integers."""
        xp = self.xp
        fmt = source.fmt
        if target.is_sub_byte:
            if mode.profile.rules.sub_byte_rounding == "half_even":
                whole = xp.round(x)
            else:
                whole = xp.trunc(x)
            # Every float of magnitude >= 2**(mantissa + 1 + bits) is a multiple of 2**bits, so
            # clipping to that bound (itself such a multiple) keeps the low bits; NaN -> 0.
            bound = float(2 ** (fmt.mantissa_bits + 1 + target.bits))
            whole = self.a.clip(whole, -bound, bound)
            # NaN is the one value unequal to itself; a comparison vectorises everywhere, while
            # Inductor lowers isnan to a scalar loop.
            whole = xp.where(whole != whole, xp.zeros_like(whole), whole)
            wide_int = _T.INT64 if bound > 2.0**31 else _T.INT32
            low = self.a.astype(whole, spec_of(wide_int)) & ((1 << target.bits) - 1)
            return self.a.from_bits(xp.astype(low, self.a.uint(8)), target)
        # Saturating truncation.  The low bound (0 or -2**k) is exact in the source format.
        # Above: where int_max is exact too, clip to it; otherwise clip to the largest float
        # below 2**k and send x >= 2**k to int_max afterwards.
        high_is_exact = target.int_max < 2 ** (fmt.mantissa_bits + 1)
        limit = float(target.int_max + 1)
        high = float(target.int_max) if high_is_exact else _largest_float_below(limit, source)
        out = self.a.astype(self.a.clip(x, float(target.int_min), high), target)
        out = xp.where(x != x, xp.zeros_like(out), out)  # NaN -> 0 (see above on isnan)
        if not high_is_exact:
            out = xp.where(x >= limit, xp.asarray(target.int_max, dtype=out.dtype), out)
        return out

    def clip_to_range(self, x: Any, source: TypeSpec, target: TypeSpec) -> Any:
        """Clip to ``target``'s integer range (legacy sub-byte rule).  NaN and Inf pass
        through, so that the conversion after it maps them to 0 as R7 says in every profile."""
        xp = self.xp
        if source.is_float:
            clipped = self.a.clip(x, float(target.int_min), float(target.int_max))
            return xp.where(xp.isinf(x), x, clipped)
        low = max(target.int_min, source.int_min)  # bounds the source dtype can hold
        return self.a.clip(x, low, min(target.int_max, source.int_max))

    def integer_to_integer(self, x: Any, target: TypeSpec) -> Any:
        """R8: keep the low bits (two's complement)."""
        if target.is_sub_byte:
            low = x & ((1 << target.bits) - 1)
            return self.a.from_bits(self.xp.astype(low, self.a.uint(8)), target)
        return self.a.astype(x, target)

    # -- IEEE targets --------------------------------------------------------------------------
    def to_ieee(self, x: Any, source: TypeSpec, target: TypeSpec) -> Any:
        """FLOAT, DOUBLE, FLOAT16 targets: native conversion of a correctly pre-rounded value."""
        if source.code in (_T.INT64, _T.UINT64) and target.code != _T.DOUBLE:
            x = self.round_to_odd_double(x, source)
        elif source.is_integer and target.code == _T.FLOAT16:
            x = self.a.astype(x, _DOUBLE)  # exact for 32-bit integers
        return self.a.astype(x, target)

    def to_bfloat16(self, x: Any, source: TypeSpec, mode: Mode, odd: bool) -> Any:
        xp = self.xp
        if mode.profile.rules.bfloat16 == "truncate":
            bits32 = self.float32_bits(x, source, odd=False)
            upper = bits32 >> 16
        else:
            bits32 = self.float32_bits(x, source, odd=odd)
            # Round to nearest even on the upper 16 bits; overflow carries into Inf.
            upper = (bits32 + (0x7FFF + ((bits32 >> 16) & 1))) >> 16
        magnitude = bits32 & 0x7FFFFFFF
        quiet_nan = (bits32 >> 16) | 0x0040  # keep sign and payload top, force a NaN
        upper = xp.where(magnitude > 0x7F800000, quiet_nan, upper)
        return self.a.from_bits(xp.astype(upper, self.a.uint(16)), _BFLOAT16)

    # -- FLOAT bits, rounded to odd ---------------------------------------------------------------
    def float32_bits(self, x: Any, source: TypeSpec, *, odd: bool) -> Any:
        """FLOAT bit patterns (uint32) of ``x``: exact, rounded to odd, or to nearest."""
        code = source.code
        if code == _T.FLOAT:
            return self.a.bits(x, _FLOAT)
        if code in (_T.INT64, _T.UINT64):
            x = self.round_to_odd_double(x, source)
        elif code != _T.DOUBLE:
            x = self.a.astype(x, _DOUBLE)  # INT32/UINT32: exact
        if odd:
            return self.round_to_odd_float(x)
        return self.a.bits(self.a.astype(x, _FLOAT), _FLOAT)

    def round_to_odd_float(self, x: Any) -> Any:
        """DOUBLE -> FLOAT bits rounded to odd (NaN stays NaN, overflow gives max, odd)."""
        xp = self.xp
        nearest = self.a.astype(x, _FLOAT)
        back = self.a.astype(nearest, _DOUBLE)
        inexact = back != x  # True for NaN too: harmless, NaN bits stay NaN below
        overshoot = xp.abs(back) > xp.abs(x)
        bits = self.a.bits(nearest, _FLOAT)
        bits = bits - xp.astype(overshoot, bits.dtype)  # step back toward zero: truncation
        return bits | xp.astype(inexact, bits.dtype)

    def round_to_odd_double(self, x: Any, source: TypeSpec) -> Any:
        """INT64/UINT64 -> DOUBLE rounded to odd, by an exact two-part sum."""
        xp = self.xp
        high = x >> 32
        low = x & 0xFFFFFFFF
        a = self.a.astype(high, _DOUBLE) * 4294967296.0  # exact
        b = self.a.astype(low, _DOUBLE)  # exact
        s = a + b  # rounded to nearest
        # TwoSum: the exact error of s, with no assumption on the magnitudes of a and b.
        bb = s - a
        err = (a - (s - bb)) + (b - bb)
        bits = self.a.bits(s, _DOUBLE)
        overshoot = (err < 0) == (s > 0)
        inexact = err != 0
        bits = bits - xp.astype(inexact & overshoot, bits.dtype)
        bits = bits | xp.astype(inexact, bits.dtype)
        return self.a.from_bits(bits, _DOUBLE)

    def float32_class_index(self, bits32: Any) -> Any:
        """Index into :func:`~castlike.spec.tables.float32_class_table` for FLOAT bits."""
        xp = self.xp
        sticky = xp.astype((bits32 & _STICKY_MASK) != 0, bits32.dtype)
        return ((bits32 >> FLOAT32_CLASS_BITS) << 1) | sticky


def _largest_float_below(limit: float, source: TypeSpec) -> float:
    """The largest value of the FLOAT/DOUBLE format ``source`` strictly below ``limit`` (> 0)."""
    fmt = source.fmt
    # limit is a power of two; the float just below it is limit * (1 - 2**-(mantissa+1)).
    return limit - limit / float(1 << (fmt.mantissa_bits + 1))
