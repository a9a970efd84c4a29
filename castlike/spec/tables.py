"""The lookup tables every engine and kernel gathers from, built here from the formats and the
rules, on the host, with no backend and no engine.

* :func:`pattern_table`: the result bits of every bit pattern of a source of 16 bits or fewer.
  Any cast from such a source is then one gather, on any backend.
* :func:`byte_table`: the same for a source held in one byte (BOOL and the sub-byte types),
  indexed by the whole storage byte, so that a gather needs no mask and no normalisation.
* :func:`float32_class_table`: FLOAT -> an 8-bit-or-smaller float target (float8, float4,
  float6, FLOAT8E8M0).  A FLOAT's result depends only on its sign, exponent, the top
  :data:`CLASS_MANTISSA_BITS` mantissa bits and whether any lower bit is set (the sticky bit),
  because every such target rounds at or above the last kept bit.  So
  ``2**(32 - FLOAT32_CLASS_BITS + 1)`` classes cover all 2**32 inputs.
* :func:`double_class_table`: the same for DOUBLE, through FLOAT rounded to odd.

Every entry comes from :func:`castlike.spec.binary.cast_patterns`, the oracle's rules in exact
integer arithmetic, which the tests hold to the Fraction oracle on every pattern and class:
directly, or through the FLOAT class table for FLOAT16/BFLOAT16 to the small floats (both
widen to FLOAT exactly) and for DOUBLE (rounded to odd into FLOAT).

NumPy is imported by the builders, not by this module.  :mod:`castlike.spec` is the one
specification and importing it needs the standard library only, so that the documentation,
the CLI and every backend can read the formats and rules (and :data:`FLOAT32_CLASS_BITS`)
without an array library.  The tables themselves are arrays, because every backend gathers
from a host array (moving it to its device once), and building 2**16 entries in NumPy takes
about a millisecond where a loop over Python integers takes a hundred.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .binary import cast_patterns
from .rules import Mode
from .types import TYPES, Kind, OnnxType, Special, TypeSpec, spec_of

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "CLASS_MANTISSA_BITS",
    "DOUBLE_CLASS_BITS",
    "FLOAT32_CLASS_BITS",
    "byte_table",
    "double_class_table",
    "float32_class_index",
    "float32_class_table",
    "pattern_table",
]

_T = OnnxType
_FLOAT = spec_of(_T.FLOAT)
_DOUBLE = spec_of(_T.DOUBLE)


def _is_small_float(t: TypeSpec) -> bool:
    return t.is_float and t.storage_bits == 8


#: Mantissa bits a class keeps: the widest small float's own (3: FLOAT8E4M3FN*, FLOAT6E2M3)
#: and its round bit.  Derived from the spec, so a wider format added to it widens the class.
CLASS_MANTISSA_BITS = max(t.fmt.mantissa_bits for t in TYPES.values() if _is_small_float(t)) + 1
#: FLOAT mantissa bits below the kept ones; their OR is the sticky bit.
FLOAT32_CLASS_BITS = _FLOAT.fmt.mantissa_bits - CLASS_MANTISSA_BITS
#: DOUBLE mantissa bits below the kept ones (sign, exponent and the same mantissa bits kept).
DOUBLE_CLASS_BITS = _DOUBLE.fmt.mantissa_bits - CLASS_MANTISSA_BITS
# A DOUBLE rounded to odd into FLOAT (24 bits) keeps the single correct rounding to any
# precision of 22 bits or fewer, the class's precision (1 + CLASS_MANTISSA_BITS) included.
assert 1 + _FLOAT.fmt.mantissa_bits >= 1 + CLASS_MANTISSA_BITS + 2
_STICKY_MASK = (1 << FLOAT32_CLASS_BITS) - 1


def _check_class_target(target: TypeSpec) -> None:
    """Refuse a target whose results a class cannot decide (never build a wrong table)."""
    if not _is_small_float(target):
        raise ValueError(f"no FLOAT class table for {target.name}")
    if target.fmt.mantissa_bits + 1 > CLASS_MANTISSA_BITS:
        raise ValueError(
            f"{target.name} has {target.fmt.mantissa_bits} mantissa bits, but a FLOAT class "
            f"keeps only {CLASS_MANTISSA_BITS} (the widest small float of castlike.spec.types "
            "and its round bit), too few to round it; add the format to "
            "castlike.spec.types.TYPES so that the class width is derived from it"
        )


def float32_class_index(bits32: Any) -> np.ndarray:
    """Class index (see module doc) of FLOAT bit patterns, on the host."""
    import numpy as np

    bits32 = np.asarray(bits32, dtype=np.uint32)
    return ((bits32 >> FLOAT32_CLASS_BITS) << 1) | ((bits32 & _STICKY_MASK) != 0)


def _read_only(table: np.ndarray) -> np.ndarray:
    table.flags.writeable = False  # shared by every caller of the cache
    return table


@lru_cache(maxsize=128)
def float32_class_table(target: TypeSpec, mode: Mode) -> np.ndarray:
    """Result bits (uint8) for each FLOAT class cast to the small float ``target``.

    Entry ``i`` is the rule's result for the class's representative FLOAT pattern
    ``(i >> 1) << FLOAT32_CLASS_BITS | (i & 1)``.
    """
    import numpy as np

    _check_class_target(target)
    mode = mode.effective_for(target)
    index = np.arange(1 << (32 - FLOAT32_CLASS_BITS + 1), dtype=np.int64)
    representatives = ((index >> 1) << FLOAT32_CLASS_BITS) | (index & 1)
    bits = cast_patterns(representatives, _FLOAT, target, mode)
    return _read_only(bits.astype(np.uint8))


@lru_cache(maxsize=128)
def double_class_table(target: TypeSpec, mode: Mode) -> np.ndarray:
    """Result bits (uint8) for each DOUBLE class cast to a small float target.

    A DOUBLE's class is its sign, exponent, top :data:`CLASS_MANTISSA_BITS` mantissa bits and
    sticky bit, as for FLOAT.  Every member of a class rounds to odd into the same FLOAT class,
    so each entry is the FLOAT class table's entry for its representative rounded to odd: the
    single correct rounding of the DOUBLE where the profile rounds a DOUBLE once (R3).  (The
    reference and legacy profiles round DOUBLE to nearest FLOAT first; engines do not use this
    table for them.)
    """
    import numpy as np

    _check_class_target(target)
    mode = mode.effective_for(target)
    # Index layout: sign, 11 exponent bits, then the kept mantissa bits and the sticky bit
    # ("low" bits); FLOAT's classes are sign, 8 exponent bits and the same low bits.
    low = CLASS_MANTISSA_BITS + 1
    floats = float32_class_table(target, mode).reshape(2, 256, 1 << low)
    table = np.empty((2, 2048, 1 << low), dtype=np.uint8)
    # FLOAT's normal range: rounding to odd keeps the class's bits, only the bias moves.
    table[:, 1023 - 126 : 1023 + 128] = floats[:, 1:255]
    # Beyond it: FLOAT's max rounded to odd (its class: exponent 254, every low bit set) ...
    beyond = floats[:, 254, -1]
    if target.code == _T.FLOAT8E8M0:
        # ... except that R6 judges range on x itself: every |x| >= 2**128 is above range, as
        # Inf is, and takes Inf's entry (the spec rule gives FLOAT's max the same result;
        # the onnx helper of the reference profiles sees these values as Inf after FLOAT
        # rounding).
        beyond = floats[:, 255, 0]
    table[:, 1023 + 128 : 2047] = beyond[:, None, None]
    table[:, 2047, 0] = floats[:, 255, 0]  # Inf
    table[:, 2047, 1:] = floats[:, 255, 1:2]  # NaN (every NaN class has the same entry)
    # Below 2**-149 (FLOAT's smallest subnormal) every nonzero DOUBLE rounds to odd into
    # that smallest subnormal, whose class is 1; the zero class is 0.
    tiny = 1023 - 149
    table[:, :tiny] = floats[:, 0, 1][:, None, None]
    table[:, 0, 0] = floats[:, 0, 0]
    # FLOAT's subnormals: rounding to odd computed on the representatives.
    first, count = tiny << low, (1023 - 126 - tiny) << low
    positive = np.arange(first, first + count, dtype=np.uint64)
    index = np.concatenate([positive, positive | np.uint64(1 << (11 + low))])  # sign bit
    one = np.uint64(1)
    representatives = ((index >> one) << np.uint64(DOUBLE_CLASS_BITS)) | (index & one)
    odd = _double_to_float_odd(representatives)
    subnormal = float32_class_table(target, mode)[float32_class_index(odd)]
    table[:, tiny : 1023 - 126] = subnormal.reshape(2, -1, 1 << low)
    return _read_only(table.reshape(-1))


def _double_to_float_odd(bits64: np.ndarray) -> np.ndarray:
    """FLOAT bits (uint32) of DOUBLE patterns rounded to odd: truncated toward zero, the last
    bit set if anything was lost; beyond FLOAT's range, FLOAT's max (odd); NaN stays NaN."""
    import numpy as np

    b = bits64.astype(np.uint64)
    negative = (b >> np.uint64(63)).astype(np.uint32) << np.uint32(31)
    field = ((b >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    mantissa = (b & np.uint64((1 << 52) - 1)).astype(np.int64)
    # A normal DOUBLE is (2**52 + mantissa) * 2**(field - 1075), with log2 = field - 1023.
    quantum = np.maximum(field - 1023, -126) - 23  # FLOAT's last kept bit
    shift = np.minimum(quantum - (field - 1075), 63)  # >= 29: DOUBLE has 29 more bits
    sig = mantissa | (1 << 52)
    kept = sig >> shift
    sticky = (sig & ((np.int64(1) << shift) - 1)) != 0
    # The encoding grows with the value; a FLOAT subnormal has quantum + 149 == 0.
    code = ((quantum + 149) << 23) + (kept | sticky)
    code = np.where(field >= 1023 + 128, 0x7F7FFFFF, code)  # beyond FLOAT: max, odd
    code = np.where(field == 0, (mantissa != 0).astype(np.int64), code)  # < 2**-1022
    special = np.where(mantissa != 0, 0x7FC00001, 0x7F800000)
    code = np.where(field == 0x7FF, special, code)
    return code.astype(np.uint32) | negative


#: Patterns the rules run on at a time: their int64 temporaries then stay in the CPU caches and
#: are reused by the allocator, where fresh pages for whole-table temporaries made a first
#: 2**16-entry table about a quarter slower.
_PATTERNS_PER_PASS = 1 << 14


@lru_cache(maxsize=512)
def pattern_table(source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    """Result bits for every bit pattern of ``source`` (at most 16 bits) cast to ``target``.

    Entries are unsigned integers of the target's storage width (BOOL: uint8 0/1): the rule's
    result for every pattern, a NaN between the IEEE types by R3's one NaN policy (the spec's
    array rules apply it: :func:`~castlike.spec.binary.cast_patterns`).
    """
    import numpy as np

    if source.storage_bits > 16 or not source.is_numeric:
        raise ValueError(f"no pattern table for {source.name}")
    mode = mode.effective_for(target)
    if source.code in (_T.FLOAT16, _T.BFLOAT16) and _has_class_table(target):
        return _read_only(_by_float_class(source, target, mode))
    patterns = np.arange(1 << source.bits, dtype=np.int64)
    parts = range(0, patterns.size, _PATTERNS_PER_PASS)
    bits = np.concatenate(
        [cast_patterns(patterns[i : i + _PATTERNS_PER_PASS], source, target, mode) for i in parts]
    )
    return _read_only(bits.astype(np.dtype(f"uint{target.storage_bits}")))


@lru_cache(maxsize=512)
def byte_table(source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    """:func:`pattern_table` of a source held in one byte, with an entry for every storage byte.

    BOOL (R8): every nonzero byte has the entry of 1.  NumPy, PyTorch and JAX read a bool
    whose byte is not 0 or 1 (an array made from foreign memory, say) as True, and so does
    castlike: a gather indexed by the byte itself then needs no pass to normalise it.  The
    sub-byte types: the entry of the byte's low ``bits`` bits (the others are not the value's).
    """
    import numpy as np

    if source.storage_bits != 8 or not source.is_numeric:
        raise ValueError(f"no byte table for {source.name}")
    table = pattern_table(source, target, mode)
    if table.shape[0] == 256:
        return table
    byte = np.arange(256)
    if source.kind is Kind.BOOL:
        index = (byte != 0).astype(np.intp)
    else:
        index = byte & ((1 << source.bits) - 1)
    return _read_only(table[index])


def _has_class_table(target: TypeSpec) -> bool:
    return _is_small_float(target) and target.fmt.mantissa_bits + 1 <= CLASS_MANTISSA_BITS


def _by_float_class(source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    """The pattern table of FLOAT16 or BFLOAT16 to a small float, from the FLOAT class table.

    Both widen to FLOAT exactly, and the rules for a float target depend on the value alone
    (the profiles' rounding through FLOAT first concerns the wide sources only), so each
    pattern's result is that of its FLOAT value's class.  A fifth of the cost of running the
    rules on all 65,536 patterns, and the class table is shared with FLOAT sources.
    """
    import numpy as np

    patterns = np.arange(1 << source.bits, dtype=np.uint32)
    if source.code == _T.BFLOAT16:
        bits32 = patterns << np.uint32(16)  # BFLOAT16 is FLOAT's upper half
    else:
        bits32 = _float16_as_float_bits(patterns)
    return float32_class_table(target, mode)[float32_class_index(bits32)]


def _float16_as_float_bits(p: np.ndarray) -> np.ndarray:
    """FLOAT bits of FLOAT16 patterns (uint32), widened exactly in integers: no float unit
    whose subnormal handling could depend on the CPU's mode."""
    import numpy as np

    sign = (p & 0x8000) << 16
    field, mantissa = (p >> 10) & 0x1F, p & 0x3FF
    normal = ((field + (127 - 15)) << 23) | (mantissa << 13)  # Inf and NaN: see below
    # A subnormal is mantissa * 2**-24: its leading bit k - 1 becomes FLOAT's implicit bit.
    k = sum(((mantissa >> i) != 0).astype(np.uint32) for i in range(10))
    subnormal = np.where(
        mantissa != 0, ((k + (127 - 25)) << 23) | ((mantissa << (24 - k)) & 0x7FFFFF), 0
    )
    special = 0x7F800000 | (mantissa << 13)  # Inf, or NaN with its payload
    bits = np.where(field == 0, subnormal, np.where(field == 0x1F, special, normal))
    return (bits | sign).astype(np.uint32)


def _is_ieee(t: TypeSpec) -> bool:
    return t.is_float and t.fmt.special is Special.IEEE
