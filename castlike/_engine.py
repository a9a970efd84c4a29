"""The vectorised rules, written once against an :class:`~castlike.backends._base.Adapter`.

Every backend runs this code.  A backend supplies primitives (bit views, gathers, ``where``,
its own conversion) and declarations (the pairs where its own conversion is the rule, whether
its float operations flush subnormals, whether it does unsigned arithmetic); the rules, the
rounding and every workaround of an unreliable float operation are here, once.  The shape of
the algorithm:

* A source of 16 bits or fewer is cast by one gather from
  :func:`~castlike.spec.tables.pattern_table`, or by the library's own conversion where the
  adapter declares that pair (:attr:`~castlike.backends._base.Adapter.native_pairs`).
* A wide source (FLOAT, DOUBLE, INT32, UINT32, INT64, UINT64) goes by target kind:

  - BOOL: ``x != 0``;
  - integers: truncation with saturation (float sources, R7) or low bits (integer sources, R8);
  - FLOAT, DOUBLE, FLOAT16: the library's conversion, fed with a value that already carries
    the single correct rounding (64-bit integers are first rounded to odd into DOUBLE, other
    sources to FLOAT16 go through FLOAT rounded to odd);
  - BFLOAT16 and the 8-bit-or-smaller floats: the value is brought to FLOAT bits *rounded to
    odd* (which keeps enough information for one correct rounding to any format of 13 bits or
    fewer of precision), then rounded by bit arithmetic or the library's declared conversion
    (BFLOAT16), the library's float8 conversion with its specials repaired
    (:mod:`castlike._float8`), or the FLOAT class table (float8, float4, float6, FLOAT8E8M0).

Rounding to odd: truncate, then set the last bit if anything was discarded.  Rounding a value
to odd at p + 2 or more bits and then to nearest at p bits equals rounding it once to p bits.

What the engine trusts of a library's float operations, unless the adapter declares that it
flushes subnormals: a widening to DOUBLE is exact; DOUBLE -> FLOAT, FLOAT -> FLOAT16 and
integer -> DOUBLE (and INT32/UINT32 -> FLOAT) round once to nearest even.  Every other
rounding is either a declared native pair (checked against the oracle by the tests) or done
here.  Where the adapter flushes subnormals, every rounding from DOUBLE and every rounding to
odd is done in integers by :mod:`castlike._exact`.

Bit patterns that the engine does arithmetic on come from
:meth:`~castlike.backends._base.Adapter.int_bits`: unsigned, or the signed view of the same
width on a library without unsigned arithmetic (torch).  The code on them is written to give
the same low bits either way: a right shift is masked where a sign could have been extended,
and comparisons of DOUBLE bits are only made between values of one sign.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _exact
from .spec.rules import ROUNDED_VIA_FLOAT_TARGETS, WIDE_SOURCES, Mode, float_to_int_zeroes
from .spec.tables import FLOAT32_CLASS_BITS, pattern_table
from .spec.types import Kind, OnnxType, Special, TypeSpec, spec_of

if TYPE_CHECKING:
    from .backends._base import Adapter
    from .spec.plan import Plan

__all__ = ["Engine", "saturation_bounds"]

_T = OnnxType
_FLOAT = spec_of(_T.FLOAT)
_DOUBLE = spec_of(_T.DOUBLE)
_FLOAT16 = spec_of(_T.FLOAT16)
_BFLOAT16 = spec_of(_T.BFLOAT16)
_IEEE_TARGETS = (_T.FLOAT, _T.DOUBLE, _T.FLOAT16)
_STICKY_MASK = (1 << FLOAT32_CLASS_BITS) - 1
#: Mask of a class index shifted right by ``FLOAT32_CLASS_BITS - 1``: its ``33 -
#: FLOAT32_CLASS_BITS`` bits without the lowest (where the sticky bit goes), so that a sign
#: extended by an arithmetic shift of signed bits is dropped.
_CLASS_MASK = (1 << (33 - FLOAT32_CLASS_BITS)) - 2
#: The one NaN pattern of the FNUZ float8 types.
_FNUZ_NAN = 0x80


def saturation_bounds(source: TypeSpec, target: TypeSpec) -> tuple[float, float, float | None]:
    """R7's saturating truncation from FLOAT/DOUBLE ``source`` to a whole-byte integer type.

    Returns ``(low, high, limit)``: clip to ``[low, high]`` (both exact in the source format)
    and truncate; where ``limit`` is not None, ``target.int_max`` is not a value of the source
    format, ``high`` is the largest one below it, and every ``x >= limit`` becomes
    ``int_max``.  The engine and the native kernels' routes share it.
    """
    mantissa = source.fmt.mantissa_bits
    low = float(target.int_min)
    if target.int_max < 2 ** (mantissa + 1):
        return low, float(target.int_max), None
    limit = float(target.int_max + 1)  # a power of two
    # The float just below a power of two p is p * (1 - 2**-(mantissa + 1)).
    return low, limit - limit / float(1 << (mantissa + 1)), limit


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

    def native_is_rule(self, source: TypeSpec, target: TypeSpec, mode: Mode | None = None) -> bool:
        """Whether the library's own conversion of ``source`` to ``target`` is the rule under
        ``mode``: the adapter declares the pair, and the mode does not change the pair's rule
        from the declared one (the default mode's)."""
        if (source.code, target.code) not in self.a.native_pairs:
            return False
        if mode is None:
            return True
        rules = mode.profile.rules
        if target.code == _T.BFLOAT16 and rules.bfloat16 != "nearest_even":
            return False
        if target.is_sub_byte and rules.sub_byte_range != "wrap":
            return False
        if float_to_int_zeroes(source, target, mode) != "none":
            return False
        return self.rounds_to_odd(source, target, mode)  # no rounding through FLOAT first

    def by_pattern_table(self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
        """One gather from the table of every source pattern, or the library's own conversion
        where that is the rule (one pass instead of an index conversion and a gather)."""
        if self.native_is_rule(source, target, mode):
            return self.native(x, source, target, mode)
        table = self.a.pattern_table(source, target, mode.effective_for(target), x)
        return self.a.from_bits(self.a.take(table, self.a.pattern_index(x, source)), target)

    def native(self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
        """The library's own conversion of a declared pair (:meth:`native_is_rule`): R8's low
        bits for two integer types, else :meth:`~castlike.backends._base.Adapter.astype`."""
        if source.is_integer and target.is_integer:
            return self.integer_to_integer(x, target)
        out = self.a.astype(x, target)
        if source.is_float and source.fmt.special is Special.FNUZ and target.is_float:
            # A library may turn the FNUZ NaN (0x80) into a positive NaN (XLA does); R3 wants
            # the table's entry (the quiet NaN with the input's sign bit set): one select.
            nan = int(pattern_table(source, target, mode.effective_for(target))[_FNUZ_NAN])
            is_nan = self.a.bits(x, source) == _FNUZ_NAN
            bits = self.a.where(is_nan, nan, self.a.int_bits(out, target))
            out = self.a.from_bits(bits, target)
        return out

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
        if t in _IEEE_TARGETS:
            return self.to_ieee(x, source, target)
        odd = self.rounds_to_odd(source, target, mode)
        if t is _T.BFLOAT16:
            return self.to_bfloat16(x, source, mode, odd)
        return self.to_small_float(x, source, target, mode, odd)

    def to_small_float(
        self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode, odd: bool
    ) -> Any:
        """float8, float4, float6 and FLOAT8E8M0 targets: FLOAT bits, then the library's float8
        conversion with its specials repaired where the adapter declares one, else the class
        table."""
        plans = self.a.native_float8_plans
        if not plans:  # the usual case; _float8 then need not load (a first cast's import time)
            return self.by_class_table(x, source, target, mode, odd)
        from ._float8 import plan_for

        plan = plan_for(plans, target, mode)
        if plan is not None:
            value = x if source.code == _T.FLOAT else self.float32_value(x, source, odd=odd)
            return self.float8_natively(value, target, plan)
        return self.by_class_table(x, source, target, mode, odd)

    def by_class_table(
        self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode, odd: bool
    ) -> Any:
        """A small float target by one gather from the FLOAT class table of FLOAT bits (rounded
        to odd, or to nearest where the profile rounds through FLOAT first)."""
        t = _T(target.code)
        # FLOAT8E8M0 judges range on x itself (R6): rounded to odd, every DOUBLE beyond 2**127
        # stays beyond it (those beyond FLOAT's range become FLOAT's max), so no special case.
        bits32 = self.float32_bits(x, source, odd=odd)
        out = self.a.take(self.class_table(target, mode, x), self.float32_class_index(bits32))
        if (
            t is _T.FLOAT8E8M0
            and not odd
            and source.code != _T.FLOAT
            and mode.profile.rules.e8m0_negative == "nan"
        ):
            # R6 [castlike]: x < 0 -> NaN, even when x rounded to -0.0 in FLOAT.
            out = self.a.where(self.is_negative(x, source), 0xFF, out)
        return self.a.from_bits(out, target)

    def float8_natively(self, value: Any, target: TypeSpec, plan: Any) -> Any:
        """The library's FLOAT -> float8 conversion of the FLOAT array ``value`` (which rounds
        to nearest even, subnormals included: declared), with what it makes of overflow, Inf
        and NaN repaired as ``plan`` (a :class:`castlike._float8.Float8Plan`) says."""
        a = self.a
        if plan.repair == "clamp":
            value = a.clip(value, -plan.top, plan.top)  # clip keeps NaN
        out = a.astype(value, target)
        if plan.repair == "nan beyond max":
            # The library saturates; beyond the rounding boundary the rule wants NaN, sign kept.
            # Saturated results are +-max, and max | NaN's magnitude bits is NaN's encoding.
            magnitude = self.xp.abs(value)
            over = magnitude >= plan.boundary if plan.inclusive else magnitude > plan.boundary
            u = a.int_bits(out, target)
            out = a.from_bits(u | a.flag(over, u) * plan.nan_magnitude, target)
        if plan.native_nan is not None:
            # The library writes NaN as native_nan|sign, the rule as native_nan - 1|sign; no
            # other value has those low seven bits, so subtracting one from exactly those bytes
            # repairs them.
            u = a.int_bits(out, target)
            out = a.from_bits(u - a.flag((u & 0x7F) == plan.native_nan, u), target)
        return out

    def class_table(self, target: TypeSpec, mode: Mode, like: Any) -> Any:
        """The FLOAT class table of ``target`` on ``like``'s device (the adapter's primitive)."""
        return self.a.class_table(target, mode.effective_for(target), like)

    def nonzero(self, x: Any, source: TypeSpec) -> Any:
        """``x != 0`` for a wide source (NaN is nonzero); on the bits where the library's float
        comparisons treat subnormals as zero."""
        if source.is_float and self.a.flushes_subnormals:
            return (self.a.int_bits(x, source) & ((1 << (source.bits - 1)) - 1)) != 0
        return x != 0

    def is_negative(self, x: Any, source: TypeSpec) -> Any:
        """``x < 0`` for a wide source (False for -0 and NaN), as :meth:`nonzero`."""
        if source.kind is Kind.UNSIGNED:
            # Never negative.  Integers are never unequal to themselves: an all-False array on
            # x's device, with no ordering (torch has none on uint32/uint64).
            return x != x
        if source.is_float and self.a.flushes_subnormals:
            b = self.a.bits(x, source)
            magnitude = b & ((1 << (source.bits - 1)) - 1)
            negative = (b >> (source.bits - 1)) != 0
            # Not -0, not NaN (NaN is not < 0); -Inf is.
            return negative & (magnitude != 0) & (magnitude <= source.fmt.inf_bits())
        return x < 0

    @staticmethod
    def rounds_to_odd(source: TypeSpec, target: TypeSpec, mode: Mode) -> bool:
        """False where the profile rounds a wide source to nearest FLOAT first (R12): through
        ml_dtypes before 0.7, and into FLOAT8E8M0 wherever the onnx helper converts."""
        if source.code not in WIDE_SOURCES:
            return True
        rules = mode.profile.rules
        if target.code == _T.FLOAT8E8M0 and rules.e8m0_by_onnx_helper:
            return False
        return not (rules.wide_sources_via_float and _T(target.code) in ROUNDED_VIA_FLOAT_TARGETS)

    # -- integers ----------------------------------------------------------------------------
    def float_to_integer(self, x: Any, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
        """R7: FLOAT/DOUBLE -> integers."""
        xp, a = self.xp, self.a
        fmt = source.fmt
        if target.is_sub_byte:
            if mode.profile.rules.sub_byte_rounding == "half_even":
                whole = xp.round(x)
            else:
                whole = xp.trunc(x)
            # Every float of magnitude >= 2**(mantissa + 1 + bits) is a multiple of 2**bits, so
            # clipping to that bound (itself such a multiple) keeps the low bits; NaN -> 0.
            bound = float(2 ** (fmt.mantissa_bits + 1 + target.bits))
            whole = a.clip(whole, -bound, bound)
            # NaN is the one value unequal to itself; a comparison vectorises everywhere, while
            # Inductor lowers isnan to a scalar loop.
            whole = a.where(whole != whole, 0.0, whole)
            wide_int = _T.INT64 if bound > 2.0**31 else _T.INT32
            low = a.astype(whole, spec_of(wide_int)) & ((1 << target.bits) - 1)
            zeroes = float_to_int_zeroes(source, target, mode)
            if zeroes != "none":
                # R12 reference: what the profile's ml_dtypes turns into 0.  NaN fails every
                # comparison, so it is zeroed too; the bounds are exact in FLOAT and DOUBLE.
                if zeroes == "beyond_range":
                    lo, hi = float(target.int_min - 1), float(target.int_max + 1)
                    keep = (x > lo) & (x < hi)
                else:  # beyond INT32, judged on x itself
                    keep = (x >= -(2.0**31)) & (x <= 2.0**31 - 1)
                low = a.where(keep, low, 0)
            return a.from_bits(a.narrow(low, 8), target)
        # Saturating truncation.  NaN -> 0 first: a clip keeps NaN, and a library's conversion
        # of NaN (or of any out-of-range value) differs by device.  The clip takes the
        # infinities to the bounds.
        low, high, limit = saturation_bounds(source, target)
        y = a.where(x != x, 0.0, x)
        out = a.astype(a.clip(y, low, high), target)
        if limit is not None:
            # int_max is not a value of the source format: the clip stopped short of it.
            out = a.where(x >= limit, target.int_max, out)
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
            return self.a.from_bits(self.a.narrow(x & ((1 << target.bits) - 1), 8), target)
        return self.a.astype(x, target)

    # -- IEEE targets --------------------------------------------------------------------------
    def to_ieee(self, x: Any, source: TypeSpec, target: TypeSpec) -> Any:
        """FLOAT, DOUBLE, FLOAT16 targets: native conversion of a correctly pre-rounded value."""
        s, t = _T(source.code), _T(target.code)
        if s is t or self.native_is_rule(source, target):
            return self.a.astype(x, target)
        flushes = self.a.flushes_subnormals
        if t is _T.DOUBLE:
            if s is _T.FLOAT and flushes:
                wide = _exact.widen_float32_bits(self.a, self.a.bits(x, _FLOAT))
                return self.a.from_bits(wide, _DOUBLE)
            return self.a.astype(x, _DOUBLE)  # exact, or one rounding of a 64-bit integer
        if t is _T.FLOAT16:
            if s is _T.FLOAT:
                return self.a.astype(x, _FLOAT16)
            if s is _T.DOUBLE and flushes:
                return self.double_narrowed(x, target)
            # FLOAT rounded to odd (24 bits >= 11 + 2) keeps the single correct rounding
            # (a library may round DOUBLE -> FLOAT16 through FLOAT, twice: torch and XLA do).
            return self.a.astype(self.float32_value(x, source, odd=True), _FLOAT16)
        # FLOAT
        if s is _T.DOUBLE and flushes:
            return self.a.from_bits(_exact.double_to_float_nearest(self.a, x), _FLOAT)
        if s in (_T.INT64, _T.UINT64):
            x = self.round_to_odd_double(x, source)
        return self.a.astype(x, _FLOAT)

    def to_bfloat16(self, x: Any, source: TypeSpec, mode: Mode, odd: bool) -> Any:
        a = self.a
        if mode.profile.rules.bfloat16 == "truncate":
            bits32 = self.float32_bits(x, source, odd=False)
            upper = bits32 >> 16  # the low 16 bits are the right ones, whatever the sign
        elif source.code == _T.DOUBLE and odd and a.flushes_subnormals:
            return self.double_narrowed(x, _BFLOAT16)
        elif self.native_is_rule(_FLOAT, _BFLOAT16, mode):
            # The library rounds FLOAT -> BFLOAT16 to nearest even and keeps NaN a NaN
            # (declared): feed it FLOAT values that carry the single rounding.
            value = x if source.code == _T.FLOAT else self.float32_value(x, source, odd=odd)
            return a.astype(value, _BFLOAT16)
        else:
            bits32 = self.float32_bits(x, source, odd=odd)
            # Round to nearest even on the upper 16 bits; overflow carries into Inf.
            upper = (bits32 + (0x7FFF + ((bits32 >> 16) & 1))) >> 16
        magnitude = bits32 & 0x7FFFFFFF
        # A NaN: keep sign and payload top, force quiet (a payload only in the dropped bits
        # would truncate to Inf).
        upper = a.where(magnitude > 0x7F800000, (bits32 >> 16) | 0x0040, upper)
        return a.from_bits(a.narrow(upper & 0xFFFF, 16), _BFLOAT16)

    def double_narrowed(self, x: Any, target: TypeSpec) -> Any:
        """DOUBLE -> FLOAT16 or BFLOAT16 rounded once, to nearest even, in integers straight
        from the DOUBLE bits (where the library flushes subnormals): what rounding to odd at
        FLOAT and then to nearest gives, in one integer pass instead of two."""
        bits = _exact.narrow_float_bits(
            self.a, self.a.bits(x, _DOUBLE), _DOUBLE.fmt, target.fmt, odd=False
        )
        return self.a.from_bits(bits, target)

    # -- FLOAT bits, rounded to odd ---------------------------------------------------------------
    def float32_value(self, x: Any, source: TypeSpec, *, odd: bool) -> Any:
        """``x`` as a FLOAT array carrying the rounding the rules need (to odd or nearest)."""
        return self.a.from_bits(self.float32_bits(x, source, odd=odd), _FLOAT)

    def float32_bits(self, x: Any, source: TypeSpec, *, odd: bool) -> Any:
        """FLOAT bit patterns of ``x`` (:meth:`~castlike.backends._base.Adapter.int_bits`):
        exact, rounded to odd, or to nearest."""
        a = self.a
        code = _T(source.code)
        if code is _T.FLOAT:
            return a.int_bits(x, _FLOAT)
        if not odd and self.native_is_rule(source, _FLOAT):
            return a.int_bits(a.astype(x, _FLOAT), _FLOAT)  # one rounding to nearest even
        if a.flushes_subnormals:
            if code is _T.DOUBLE and not odd:
                return _exact.double_to_float_nearest(a, x)
            if code is _T.DOUBLE:
                return self.round_to_odd_float(x)
            if odd:
                return _exact.integer_to_float32_odd(a, x, source)
        if code in (_T.INT64, _T.UINT64):
            x = self.round_to_odd_double(x, source)
        elif code is not _T.DOUBLE:
            x = a.astype(x, _DOUBLE)  # INT32/UINT32: exact
        if odd:
            return self.round_to_odd_float(x)
        return a.int_bits(a.astype(x, _FLOAT), _FLOAT)

    def round_to_odd_float(self, x: Any) -> Any:
        """DOUBLE -> FLOAT bits rounded to odd (NaN stays NaN, overflow gives max, odd).

        The nearest FLOAT, widened back (``back``), has the sign of ``x``; for doubles of one
        sign the bit patterns order as the magnitudes (signed or unsigned view alike), so
        "``|back| > |x|``" is one integer comparison, and stepping the FLOAT bits back by one
        truncates.  A NaN may compare either way: a quiet FLOAT NaN minus one is still NaN.
        Where the library flushes subnormals (or may drop the round trip), in integers.
        """
        a = self.a
        if a.flushes_subnormals:
            bits = a.bits(x, _DOUBLE)
            odd = _exact.narrow_float_bits(a, bits, _DOUBLE.fmt, _FLOAT.fmt, odd=True)
            return self.xp.astype(odd, a.uint(32))
        nearest = a.astype(x, _FLOAT)
        back = a.int_bits(a.astype(nearest, _DOUBLE), _DOUBLE)
        exact = a.int_bits(x, _DOUBLE)
        bits = a.int_bits(nearest, _FLOAT)
        bits = bits - a.flag(back > exact, bits)  # toward zero
        return bits | a.flag(back != exact, bits)

    def round_to_odd_double(self, x: Any, source: TypeSpec) -> Any:
        """INT64/UINT64 -> DOUBLE rounded to odd, by an exact two-part sum."""
        a = self.a
        if source.kind is Kind.UNSIGNED:
            u = a.int_bits(x, source)
            high = (u >> 32) & 0xFFFFFFFF  # masked: a signed view's shift extends the sign
        else:
            u = x
            high = u >> 32  # arithmetic: hi + lo is x
        low = u & 0xFFFFFFFF
        hi = a.astype(high, _DOUBLE) * 4294967296.0  # exact
        lo = a.astype(low, _DOUBLE)  # exact
        s = hi + lo  # rounded to nearest
        # TwoSum: the exact error of s, with no assumption on the magnitudes of hi and lo.
        bb = s - hi
        err = (hi - (s - bb)) + (lo - bb)
        inexact = err != 0
        overshoot = inexact & ((err < 0) == (s > 0))
        bits = a.int_bits(s, _DOUBLE)
        bits = bits - a.flag(overshoot, bits)
        return a.from_bits(bits | a.flag(inexact, bits), _DOUBLE)

    def float32_class_index(self, bits32: Any) -> Any:
        """Index into :func:`~castlike.spec.tables.float32_class_table` for FLOAT bits
        (unsigned or the signed view): ``(bits >> FLOAT32_CLASS_BITS) << 1 | sticky``."""
        # sticky = 1 if any of the low bits is set, (low + mask) >> bits, in the bits' own
        # dtype (an op mixing bool and int32 runs element by element in eager torch).
        sticky = ((bits32 & _STICKY_MASK) + _STICKY_MASK) >> FLOAT32_CLASS_BITS
        return ((bits32 >> (FLOAT32_CLASS_BITS - 1)) & _CLASS_MASK) | sticky
