"""The array engine: every family and step of a cast's route, written once against an
:class:`~castlike._adapter.Adapter`.

The route of a cast (:func:`castlike.spec.route.route_for`) is decided by the spec from the
pair, the mode and what the adapter declares (:meth:`~castlike._adapter.Adapter.
capabilities`); this module carries it out and decides nothing of its own.  A backend supplies
primitives (bit views, gathers, ``where``, its own conversion).  The families:

* a source of 16 bits or fewer: one gather from :func:`~castlike.spec.tables.pattern_table`,
  or the library's own conversion where the adapter declares that it is the rule;
* a wide source (FLOAT, DOUBLE, INT32, UINT32, INT64, UINT64), by target kind:

  - BOOL: ``x != 0``;
  - integers: truncation with saturation (float sources, R7) or low bits (integer sources,
    R8), 4/2-bit targets rounded first;
  - FLOAT, DOUBLE, FLOAT16: the library's conversion, fed with a value that already carries
    the single correct rounding;
  - BFLOAT16 and the 8-bit-or-smaller floats: the value brought to FLOAT bits *rounded to
    odd* (which keeps enough information for one correct rounding to any format of 13 bits
    or fewer of precision), then rounded by bit arithmetic or the library's declared
    conversion (BFLOAT16), the library's float8 conversion with its specials repaired, or the
    FLOAT class table (float8, float4, float6, FLOAT8E8M0).

Rounding to odd: truncate, then set the last bit if anything was discarded.  Rounding a value
to odd at p + 2 or more bits and then to nearest at p bits equals rounding it once to p bits.

What the engine trusts of a library's float operations, unless the adapter declares that it
flushes subnormals: a widening to DOUBLE is exact; DOUBLE -> FLOAT, FLOAT -> FLOAT16 and
integer -> DOUBLE (and INT32/UINT32 -> FLOAT) round once to nearest even.  Every other
rounding is either a declared library pair (checked against the oracle by the tests) or done
here.  Where the adapter flushes subnormals, the routes take the integer routines of
:mod:`castlike._exact` instead.

Bit patterns that the engine does arithmetic on come from
:meth:`~castlike._adapter.Adapter.int_bits`: unsigned, or the signed view of the same
width on a library without unsigned arithmetic (torch).  The code on them is written to give
the same low bits either way: a right shift is masked where a sign could have been extended,
and comparisons of DOUBLE bits are only made between values of one sign.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _exact
from .spec.packing import layout_of, pack_rows, unpack_rows
from .spec.route import Family, FloatBits, IeeeRecipe, Route, route_for
from .spec.rules import Mode
from .spec.tables import DOUBLE_CLASS_BITS, FLOAT32_CLASS_BITS, double_class_table
from .spec.types import Kind, OnnxType, TypeSpec, spec_of

if TYPE_CHECKING:
    from ._adapter import Adapter
    from .spec.float8_repairs import Float8Plan
    from .spec.plan import Plan

__all__ = ["Engine"]

_T = OnnxType
_FLOAT = spec_of(_T.FLOAT)
_DOUBLE = spec_of(_T.DOUBLE)
_FLOAT16 = spec_of(_T.FLOAT16)
_BFLOAT16 = spec_of(_T.BFLOAT16)
_STICKY_MASK = (1 << FLOAT32_CLASS_BITS) - 1
#: Mask of a class index shifted right by ``FLOAT32_CLASS_BITS - 1``: its ``33 -
#: FLOAT32_CLASS_BITS`` bits without the lowest (where the sticky bit goes), so that a sign
#: extended by an arithmetic shift of signed bits is dropped.
_CLASS_MASK = (1 << (33 - FLOAT32_CLASS_BITS)) - 2


class Engine:
    """A cast's route carried out on arrays of one library."""

    def __init__(self, adapter: Adapter) -> None:
        self.a = adapter
        self.xp = adapter.xp

    # -- entry points ------------------------------------------------------------------------
    def cast(self, x: Any, plan: Plan) -> Any:
        """Cast ``x`` (whose type is ``plan.source``) as ``plan`` says."""
        return self.run(x, self.route(plan.source, plan.target, plan.mode))

    def cast_packed(self, x: Any, plan: Plan, *, source_row: int | None, pack: bool) -> Any:
        """Cast with packed layouts (:mod:`castlike.spec.packing`) on either side.

        ``x`` is an array of ``plan.source``, or, with ``source_row``, its packed bytes
        (uint8, shape ``(..., packed_length(source_row))``).  With ``pack`` the result is the
        cast's bit patterns packed row by row (uint8), else an array of ``plan.target``.

        Composed of the library's own operations here: unpack, the cast, pack (three passes);
        the NumPy and torch CPU engines run a native kernel that does it in one.
        """
        a, xp = self.a, self.xp
        if source_row is not None:
            source_layout = layout_of(plan.source)
            assert source_layout is not None
            x = a.from_bits(unpack_rows(xp, x, source_layout, source_row), plan.source)
        y = self.cast(x, plan)
        if not pack:
            return y
        target_layout = layout_of(plan.target)
        assert target_layout is not None
        return pack_rows(xp, a.narrow(a.bits(y, plan.target), 8), target_layout)

    def route(self, source: TypeSpec, target: TypeSpec, mode: Mode) -> Route:
        """The spec's route of the cast on this engine's library."""
        return route_for(source, target, mode, self.a.capabilities())

    def run(self, x: Any, route: Route) -> Any:
        """Carry out ``route`` on ``x``: its family's implementation, then R3's NaN policy
        where the route asks for it."""
        out = getattr(self, _FAMILY_METHODS[route.family])(x, route)
        if route.nan_policy:
            out = self.ieee_nan_policy(x, out, route.source, route.target)
        return out

    # -- the families --------------------------------------------------------------------------
    def library(self, x: Any, route: Route) -> Any:
        """The library's own conversion of a declared pair, the FNUZ NaN given the rule's
        bits where the route says (a library may write a positive NaN for it: XLA does)."""
        out = self.a.astype(x, route.target)
        if route.fnuz_nan is not None:
            source, target = route.source, route.target
            is_nan = self.a.bits(x, source) == source.fmt.sign_mask  # FNUZ's one NaN
            bits = self.a.where(is_nan, route.fnuz_nan, self.a.int_bits(out, target))
            out = self.a.from_bits(bits, target)
        return out

    def pattern_table(self, x: Any, route: Route) -> Any:
        """One gather from the table of every source pattern."""
        source, target = route.source, route.target
        table = self.a.pattern_table(source, target, route.mode, x)
        return self.a.from_bits(self.a.take(table, self.a.pattern_index(x, source)), target)

    def low_bits(self, x: Any, route: Route) -> Any:
        """R8: keep the low bits (two's complement), after the route's clip (legacy)."""
        if route.clip is not None:
            x = self.clip_to_range(x, route.source, route.clip)
        return self.integer_to_integer(x, route.target)

    def nonzero(self, x: Any, route: Route) -> Any:
        """``x != 0`` for a wide source (NaN is nonzero); on the bits where the route says."""
        source = route.source
        if route.on_bits:
            return (self.a.int_bits(x, source) & ((1 << (source.bits - 1)) - 1)) != 0
        return x != 0

    def saturating_truncation(self, x: Any, route: Route) -> Any:
        """R7: FLOAT/DOUBLE -> 8- to 64-bit integers, truncated and saturated.

        NaN first: a clip keeps NaN, and a library's conversion of NaN (or of any value out of
        range) differs by device.  The clip takes the infinities to the bounds."""
        a, target = self.a, route.target
        assert route.saturation is not None and route.nan_result is not None
        low, high, limit = route.saturation
        y = a.where(x != x, 0.0, x)  # NaN is the one value unequal to itself
        out = a.astype(a.clip(y, low, high), target)
        if limit is not None:
            # int_max is not a value of the source format: the clip stopped short of it.
            out = a.where(x >= limit, target.int_max, out)
        if route.nan_result != 0:
            out = a.where(x != x, _signed(route.nan_result, target), out)
        return out

    def sub_byte(self, x: Any, route: Route) -> Any:
        """FLOAT/DOUBLE -> INT4/UINT4/INT2/UINT2: rounded as the route says, low bits kept,
        NaN and Inf to the route's result, and the profile's zeroes."""
        xp, a, source, target = self.xp, self.a, route.source, route.target
        assert route.nan_result is not None
        if route.clip is not None:
            x = self.clip_to_range(x, source, route.clip)
        whole = xp.round(x) if route.rounding == "half_even" else xp.trunc(x)
        # Every float of magnitude >= wrap_bound is a multiple of 2**bits, so clipping to that
        # bound (itself such a multiple) keeps the low bits.
        bound = route.wrap_bound
        whole = a.clip(whole, -bound, bound)
        # NaN is the one value unequal to itself; a comparison vectorises everywhere, while
        # Inductor lowers isnan to a scalar loop.
        whole = a.where(whole != whole, float(route.nan_result), whole)
        wide_int = _T.INT64 if bound > 2.0**31 else _T.INT32
        low = a.astype(whole, spec_of(wide_int)) & ((1 << target.bits) - 1)
        if route.keep is not None:
            # R12 reference: what the profile's ml_dtypes turns into 0.  NaN fails every
            # comparison, so it is zeroed too; the bounds are exact in FLOAT and DOUBLE.
            lo, hi, inclusive = route.keep
            keep = ((x >= lo) & (x <= hi)) if inclusive else ((x > lo) & (x < hi))
            low = a.where(keep, low, 0)
        return a.from_bits(a.narrow(low, 8), target)

    def ieee(self, x: Any, route: Route) -> Any:
        """FLOAT, DOUBLE, FLOAT16 targets: one rounding, by the route's recipe."""
        a, source, target, recipe = self.a, route.source, route.target, route.ieee
        if recipe is IeeeRecipe.LIBRARY:
            return a.astype(x, target)
        if recipe is IeeeRecipe.WIDEN_IN_INTEGERS:
            return a.from_bits(_exact.widen_float32_bits(a, a.bits(x, _FLOAT)), _DOUBLE)
        if recipe is IeeeRecipe.NARROW_IN_INTEGERS:
            return self.double_narrowed(x, target)
        if recipe is IeeeRecipe.VIA_ODD_DOUBLE:
            return a.astype(self.round_to_odd_double(x, source), target)
        assert recipe is IeeeRecipe.VIA_ODD_FLOAT and route.float_bits is not None
        return a.astype(self.float32_value(x, route), target)

    def bfloat16(self, x: Any, route: Route) -> Any:
        a = self.a
        if route.ieee is IeeeRecipe.NARROW_IN_INTEGERS:
            return self.double_narrowed(x, _BFLOAT16)
        assert route.float_bits is not None
        if route.library_bfloat16:
            # The library rounds FLOAT -> BFLOAT16 to nearest even (declared): feed it FLOAT
            # values that carry the single rounding.
            return a.astype(self.float32_value(x, route), _BFLOAT16)
        bits32 = self.float32_bits(x, route)
        # BFLOAT16 is FLOAT's upper half: the same sign and exponent, fewer mantissa bits.
        dropped = _FLOAT.fmt.mantissa_bits - _BFLOAT16.fmt.mantissa_bits
        # Truncation keeps the upper half (the low bits are the right ones, whatever the sign);
        # rounding to nearest even adds half less one, plus the kept last bit (an overflow
        # carries into Inf).
        rounding = 0 if route.truncate else ((1 << (dropped - 1)) - 1) + ((bits32 >> dropped) & 1)
        upper = (bits32 + rounding) >> dropped
        magnitude = bits32 & (_FLOAT.fmt.sign_mask - 1)
        # A NaN (R3): quiet, its sign and payload top bits kept (a payload only in the dropped
        # bits would otherwise truncate to Inf).
        quiet = 1 << (_BFLOAT16.fmt.mantissa_bits - 1)
        upper = a.where(magnitude > _FLOAT.fmt.inf_bits(), (bits32 >> dropped) | quiet, upper)
        return a.from_bits(a.narrow(upper & ((1 << _BFLOAT16.bits) - 1), 16), _BFLOAT16)

    def small_float(self, x: Any, route: Route) -> Any:
        """float8, float4, float6 and FLOAT8E8M0 targets: FLOAT bits, then the library's
        float8 conversion with its specials repaired, or one gather from the class table."""
        source, target = route.source, route.target
        a = self.a
        if route.double_classes:
            # One gather from the DOUBLE class table (see castlike.spec.tables).
            bits = a.bits(x, _DOUBLE)
            index = (bits >> DOUBLE_CLASS_BITS) << 1
            index = index | a.flag((bits & ((1 << DOUBLE_CLASS_BITS) - 1)) != 0, index)
            table = a.device_table(double_class_table(target, route.mode), x)
            return a.from_bits(a.take(table, index), target)
        assert route.float_bits is not None
        if route.float8_plan is not None:
            value = self.float32_value(x, route)
            return self.float8_by_library(value, target, route.float8_plan)
        bits32 = self.float32_bits(x, route)
        out = self.a.take(self.class_table(route, x), self.float32_class_index(bits32))
        if route.negative_is_nan:
            # R6 [castlike]: x < 0 -> NaN, even when x rounded to -0.0 in FLOAT.
            nan = target.fmt.nan_bits()
            out = self.a.where(self.is_negative(x, source, route.on_bits), nan, out)
        return self.a.from_bits(out, target)

    # -- steps shared by the families ------------------------------------------------------------
    def class_table(self, route: Route, like: Any) -> Any:
        """The FLOAT class table of the route's target on ``like``'s device."""
        return self.a.class_table(route.target, route.mode, like)

    def float8_by_library(self, value: Any, target: TypeSpec, plan: Float8Plan) -> Any:
        """The library's FLOAT -> float8 conversion of the FLOAT array ``value`` (which rounds
        to nearest even, subnormals included: declared), with what it makes of overflow, Inf
        and NaN repaired as ``plan`` says."""
        a = self.a
        if plan.repair == "clamp":
            value = a.clip(value, -plan.top, plan.top)  # clip keeps NaN
        out = a.astype(value, target)
        if plan.repair == "nan beyond max":
            # Beyond the rounding boundary the rule wants NaN, sign kept.  The library wrote
            # +-max there (or, where the plan allows, Inf or its NaN), and each of those |
            # NaN's magnitude bits is NaN's encoding.
            magnitude = self.xp.abs(value)
            over = magnitude >= plan.boundary if plan.inclusive else magnitude > plan.boundary
            u = a.int_bits(out, target)
            out = a.from_bits(u | a.flag(over, u) * plan.nan_magnitude, target)
        if plan.library_nan is not None:
            # The library writes NaN as library_nan|sign, the rule as library_nan - 1|sign; no
            # other value has those low bits (below the sign), so subtracting one from exactly
            # those bytes repairs them.
            u = a.int_bits(out, target)
            low = target.fmt.sign_mask - 1
            out = a.from_bits(u - a.flag((u & low) == plan.library_nan, u), target)
        return out

    def ieee_nan_policy(self, x: Any, out: Any, source: TypeSpec, target: TypeSpec) -> Any:
        """R3's NaN policy on ``out``: where ``x`` (between two different IEEE types) is NaN,
        the quiet NaN with its sign and payload top bits
        (:func:`~castlike.spec.rules.ieee_nan_field`), whatever the step wrote."""
        a, xp = self.a, self.xp
        s, t = source.fmt, target.fmt
        b = a.int_bits(x, source)
        payload = b & ((1 << s.mantissa_bits) - 1)
        negative = ((b >> (source.bits - 1)) & 1) != 0
        shift = t.mantissa_bits - s.mantissa_bits
        if shift < 0:  # narrowing: the top bits, in the source's width
            payload = payload >> -shift
        payload = xp.astype(payload, a.int_bits(out, target).dtype)
        if shift > 0:
            payload = payload << shift
        inf = t.inf_bits()
        assert inf is not None  # the IEEE formats
        field = payload | (inf | (1 << (t.mantissa_bits - 1)))  # quiet
        # The sign into the top bit by a shift: on a signed view (torch) a constant there
        # would not fit the dtype.
        nan = field | (a.flag(negative, field) << (target.bits - 1))
        bits = a.where(x != x, nan, a.int_bits(out, target))
        return a.from_bits(bits, target)

    def is_negative(self, x: Any, source: TypeSpec, on_bits: bool) -> Any:
        """``x < 0`` for a wide source (False for -0 and NaN), on the bits where asked."""
        if source.kind is Kind.UNSIGNED:
            # Never negative.  Integers are never unequal to themselves: an all-False array on
            # x's device, with no ordering (torch has none on uint32/uint64).
            return x != x
        if source.is_float and on_bits:
            b = self.a.bits(x, source)
            magnitude = b & ((1 << (source.bits - 1)) - 1)
            negative = (b >> (source.bits - 1)) != 0
            # Not -0, not NaN (NaN is not < 0); -Inf is.
            return negative & (magnitude != 0) & (magnitude <= source.fmt.inf_bits())
        return x < 0

    def clip_to_range(self, x: Any, source: TypeSpec, bounds: tuple[int, int]) -> Any:
        """Clip to ``bounds`` (the legacy sub-byte rule).  NaN and Inf pass through, so that
        the conversion after it maps them to the route's NaN and Inf results."""
        xp = self.xp
        low, high = bounds
        if source.is_float:
            clipped = self.a.clip(x, float(low), float(high))
            return xp.where(xp.isinf(x), x, clipped)
        low = max(low, source.int_min)  # bounds the source dtype can hold
        return self.a.clip(x, low, min(high, source.int_max))

    def integer_to_integer(self, x: Any, target: TypeSpec) -> Any:
        """R8: keep the low bits (two's complement)."""
        if target.is_sub_byte:
            return self.a.from_bits(self.a.narrow(x & ((1 << target.bits) - 1), 8), target)
        return self.a.astype(x, target)

    def double_narrowed(self, x: Any, target: TypeSpec) -> Any:
        """DOUBLE -> FLOAT, FLOAT16 or BFLOAT16 rounded once, to nearest even, in integers
        straight from the DOUBLE bits (where the library flushes subnormals)."""
        if target.code == _T.FLOAT:
            return self.a.from_bits(_exact.double_to_float_nearest(self.a, x), _FLOAT)
        bits = _exact.narrow_float_bits(
            self.a, self.a.bits(x, _DOUBLE), _DOUBLE.fmt, target.fmt, odd=False
        )
        return self.a.from_bits(bits, target)

    # -- FLOAT bits ------------------------------------------------------------------------------
    def float32_value(self, x: Any, route: Route) -> Any:
        """``x`` as a FLOAT array carrying the rounding the route needs."""
        if route.float_bits is FloatBits.SAME:
            return x
        return self.a.from_bits(self.float32_bits(x, route), _FLOAT)

    def float32_bits(self, x: Any, route: Route) -> Any:
        """FLOAT bit patterns of ``x`` (:meth:`~castlike._adapter.Adapter.int_bits`):
        exact, rounded to odd, or to nearest, as the route's :class:`FloatBits` says."""
        a, source, how = self.a, route.source, route.float_bits
        if how is FloatBits.SAME:
            return a.int_bits(x, _FLOAT)
        if how is FloatBits.LIBRARY_NEAREST:
            return a.int_bits(a.astype(x, _FLOAT), _FLOAT)  # one rounding to nearest even
        if how is FloatBits.NEAREST_IN_INTEGERS:
            return _exact.double_to_float_nearest(a, x)
        if how is FloatBits.ODD_IN_INTEGERS:
            odd = _exact.narrow_float_bits(a, a.bits(x, _DOUBLE), _DOUBLE.fmt, _FLOAT.fmt, odd=True)
            return self.xp.astype(odd, a.uint(32))
        if how is FloatBits.INTEGER_ODD_IN_INTEGERS:
            return _exact.integer_to_float32_odd(a, x, source)
        if how is FloatBits.CLAMPED_INTEGER:
            # Every integer beyond the clip is beyond the target's max, so clipping keeps the
            # result, and the clipped integer is exact in FLOAT (the route's bounds).
            assert route.clip is not None
            low, high = route.clip
            return a.int_bits(a.astype(a.clip(x, low, high), _FLOAT), _FLOAT)
        code = _T(source.code)
        if code in (_T.INT64, _T.UINT64):
            x = self.round_to_odd_double(x, source)
        elif code is not _T.DOUBLE:
            x = a.astype(x, _DOUBLE)  # INT32/UINT32: exact
        if how is FloatBits.ODD:
            return self.round_to_odd_float(x)
        assert how is FloatBits.NEAREST
        return a.int_bits(a.astype(x, _FLOAT), _FLOAT)

    def round_to_odd_float(self, x: Any) -> Any:
        """DOUBLE -> FLOAT bits rounded to odd (NaN stays NaN, overflow gives max, odd).

        The nearest FLOAT, widened back (``back``), has the sign of ``x``; for doubles of one
        sign the bit patterns order as the magnitudes (signed or unsigned view alike), so
        "``|back| > |x|``" is one integer comparison, and stepping the FLOAT bits back by one
        truncates.  A NaN may compare either way: a quiet FLOAT NaN minus one is still NaN.
        """
        a = self.a
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


def _signed(bits: int, target: TypeSpec) -> int:
    """The value of an integer target's bit pattern (two's complement for signed types)."""
    if target.kind is Kind.SIGNED and bits >> (target.bits - 1):
        return bits - (1 << target.bits)
    return bits


#: The engine method that carries out each family.
_FAMILY_METHODS = {
    Family.LIBRARY: "library",
    Family.PATTERN_TABLE: "pattern_table",
    Family.LOW_BITS: "low_bits",
    Family.NONZERO: "nonzero",
    Family.SATURATING_TRUNCATION: "saturating_truncation",
    Family.SUB_BYTE: "sub_byte",
    Family.IEEE: "ieee",
    Family.BFLOAT16: "bfloat16",
    Family.SMALL_FLOAT: "small_float",
}
