"""The 26 ONNX element types of Cast-28 (rule R1), one frozen record per type.

Standard library only: this module describes *formats* (bit widths, exponent bias, special
encodings), never a backend's dtype objects.  Backends bind these records to their own dtypes.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

__all__ = [
    "COMPLEX_CODES",
    "TYPES",
    "TYPES_BY_NAME",
    "FloatFormat",
    "Kind",
    "OnnxType",
    "Special",
    "TypeSpec",
    "spec_of",
]


class OnnxType(enum.IntEnum):
    """ONNX element types by their ``TensorProto.DataType`` code (COMPLEX excluded)."""

    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20
    UINT4 = 21
    INT4 = 22
    FLOAT4E2M1 = 23
    FLOAT8E8M0 = 24
    UINT2 = 25
    INT2 = 26
    FLOAT6E2M3 = 27
    FLOAT6E3M2 = 28

    @property
    def spec(self) -> TypeSpec:
        """The format record of this type."""
        return TYPES[self]


#: TensorProto codes castlike rejects with "casting from/to complex is not supported".
COMPLEX_CODES = {14: "COMPLEX64", 15: "COMPLEX128"}


class Kind(enum.Enum):
    """What kind of number a type holds; it decides which rule of R3-R9 applies."""

    BOOL = "bool"
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    FLOAT = "float"
    STRING = "string"


class Special(enum.Enum):
    """How a float format spends its special encodings."""

    #: IEEE 754: all-ones exponent is Inf (mantissa 0) or NaN.
    IEEE = "ieee"
    #: "FN": no Inf; only the all-ones pattern (per sign) is NaN (FLOAT8E4M3FN).
    FN = "fn"
    #: "FNUZ": no Inf, no negative zero; the negative-zero pattern 0x80 is the only NaN.
    FNUZ = "fnuz"
    #: Finite only: no Inf, no NaN (FLOAT4E2M1, FLOAT6*).
    FINITE = "finite"
    #: FLOAT8E8M0: unsigned powers of two, no zero; 0xFF is NaN.
    E8M0 = "e8m0"


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: sign bit (unless E8M0), exponent and mantissa fields."""

    exponent_bits: int
    mantissa_bits: int
    bias: int
    special: Special

    @cached_property
    def signed(self) -> bool:
        """Whether the format has a sign bit (all but E8M0)."""
        return self.special is not Special.E8M0

    @cached_property
    def total_bits(self) -> int:
        return int(self.signed) + self.exponent_bits + self.mantissa_bits

    @cached_property
    def sign_mask(self) -> int:
        return (1 << (self.total_bits - 1)) if self.signed else 0

    @cached_property
    def has_inf(self) -> bool:
        return self.special is Special.IEEE

    @cached_property
    def has_nan(self) -> bool:
        return self.special is not Special.FINITE

    @cached_property
    def has_negative_zero(self) -> bool:
        return self.special in (Special.IEEE, Special.FN, Special.FINITE)

    @cached_property
    def min_exponent(self) -> int:
        """Unbiased exponent of the smallest normal number."""
        if self.special is Special.E8M0:
            return -self.bias
        return 1 - self.bias

    @cached_property
    def max_bits(self) -> int:
        """Bit pattern of the largest finite positive value."""
        e, m = self.exponent_bits, self.mantissa_bits
        all_exp, all_man = (1 << e) - 1, (1 << m) - 1
        if self.special is Special.IEEE:
            return ((all_exp - 1) << m) | all_man
        if self.special is Special.FN:
            return (all_exp << m) | (all_man - 1)
        if self.special is Special.E8M0:
            return all_exp - 1
        return (all_exp << m) | all_man  # FNUZ and FINITE use every pattern

    @cached_property
    def max_value(self) -> Fraction:
        """Largest finite value."""
        return self.magnitude_of(self.max_bits)

    @cached_property
    def min_normal(self) -> Fraction:
        return Fraction(2) ** self.min_exponent

    @cached_property
    def nearest_overflow(self) -> Fraction:
        """The smallest magnitude that rounds to nearest beyond :attr:`max_value`: the largest
        value plus half its ulp (the tie goes to the even pattern past it).  For the IEEE
        formats, the start of the values that round to Inf."""
        m = self.mantissa_bits
        exponent = ((self.max_bits >> m) & ((1 << self.exponent_bits) - 1)) - self.bias
        half_ulp = Fraction(2) ** (exponent - m - 1)
        return self.max_value + half_ulp

    @cached_property
    def overflow_integer(self) -> int:
        """The least integer that rounds to nearest beyond :attr:`max_value` (to Inf in the
        IEEE formats): an integer clipped to +-this one keeps its result."""
        return math.ceil(self.nearest_overflow)

    @cached_property
    def exact_integer_bound(self) -> int:
        """Every integer of magnitude up to this one is exact in the format (2**(m+1))."""
        return 1 << (self.mantissa_bits + 1)

    @cached_property
    def min_subnormal(self) -> Fraction:
        """Smallest positive value (E8M0 has no subnormals: its smallest is 2^-127)."""
        if self.special is Special.E8M0:
            return self.min_normal
        return Fraction(2) ** (self.min_exponent - self.mantissa_bits)

    def nan_bits(self, negative: bool = False) -> int | None:
        """The NaN encoding castlike produces (rule R4), or None for finite-only formats."""
        e, m = self.exponent_bits, self.mantissa_bits
        if self.special is Special.IEEE:
            # Quiet NaN: all-ones exponent, top mantissa bit.  For E5M2 this is 0x7E (ml_dtypes).
            bits = (((1 << e) - 1) << m) | (1 << (m - 1))
        elif self.special is Special.FN:
            bits = (1 << (e + m)) - 1
        elif self.special is Special.FNUZ:
            return self.sign_mask
        elif self.special is Special.E8M0:
            return (1 << e) - 1
        else:
            return None
        return bits | (self.sign_mask if negative else 0)

    def inf_bits(self, negative: bool = False) -> int | None:
        if not self.has_inf:
            return None
        bits = ((1 << self.exponent_bits) - 1) << self.mantissa_bits
        return bits | (self.sign_mask if negative else 0)

    def is_nan_bits(self, bits: int) -> bool:
        mag = bits & ~self.sign_mask
        e, m = self.exponent_bits, self.mantissa_bits
        if self.special is Special.IEEE:
            return (mag >> m) == (1 << e) - 1 and (mag & ((1 << m) - 1)) != 0
        if self.special is Special.FN:
            return mag == (1 << (e + m)) - 1
        if self.special is Special.FNUZ:
            return bits == self.sign_mask
        if self.special is Special.E8M0:
            return bits == (1 << e) - 1
        return False

    def is_inf_bits(self, bits: int) -> bool:
        return self.has_inf and (bits & ~self.sign_mask) == self.inf_bits()

    def magnitude_of(self, bits: int) -> Fraction:
        """Magnitude of a finite, non-NaN pattern (the sign bit is ignored)."""
        m_bits = self.mantissa_bits
        mag = bits & ~self.sign_mask
        exp_field = mag >> m_bits
        mantissa = mag & ((1 << m_bits) - 1)
        if self.special is Special.E8M0:
            return _scaled(1, exp_field - self.bias)
        if exp_field == 0:
            return _scaled(mantissa, self.min_exponent - m_bits)
        return _scaled((1 << m_bits) | mantissa, exp_field - self.bias - m_bits)


def _scaled(n: int, k: int) -> Fraction:
    """``n * 2**k`` as an exact Fraction."""
    return Fraction(n << k) if k >= 0 else Fraction(n, 1 << -k)


@dataclass(frozen=True)
class TypeSpec:
    """One ONNX element type: its name, code, kind and (for floats) its format."""

    name: str
    code: int
    kind: Kind
    #: Logical width in bits (BOOL: 1, STRING: 0).  Sub-byte types are held one per byte.
    bits: int
    float_format: FloatFormat | None = None

    def __hash__(self) -> int:
        # The name alone (equal specs have equal names): a spec is hashed in every cached
        # lookup of a cast, several per call, and the fields' hash, FloatFormat's included,
        # cost more than the rest of such a lookup.
        return hash(self.name)

    @property
    def onnx_type(self) -> OnnxType:
        return OnnxType(self.code)

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_integer(self) -> bool:
        return self.kind in (Kind.SIGNED, Kind.UNSIGNED)

    @property
    def is_numeric(self) -> bool:
        return self.kind is not Kind.STRING

    @property
    def is_sub_byte(self) -> bool:
        return self.kind is not Kind.BOOL and 0 < self.bits < 8

    @property
    def storage_bits(self) -> int:
        """Bits one element occupies in memory (sub-byte types and BOOL take a byte)."""
        return max(8, self.bits) if self.kind is not Kind.STRING else 0

    @property
    def int_min(self) -> int:
        if self.kind is Kind.SIGNED:
            return -(1 << (self.bits - 1))
        return 0

    @property
    def int_max(self) -> int:
        if self.kind is Kind.SIGNED:
            return (1 << (self.bits - 1)) - 1
        if self.kind is Kind.BOOL:
            return 1
        return (1 << self.bits) - 1

    @property
    def fmt(self) -> FloatFormat:
        """The float format; raises for non-float types (a programming error)."""
        if self.float_format is None:
            raise AttributeError(f"{self.name} is not a float type")
        return self.float_format

    def __repr__(self) -> str:
        return f"TypeSpec({self.name})"


def _f(name: str, code: int, e: int, m: int, bias: int, special: Special) -> TypeSpec:
    fmt = FloatFormat(e, m, bias, special)
    return TypeSpec(name, code, Kind.FLOAT, fmt.total_bits, fmt)


def _i(name: str, code: int, bits: int, signed: bool) -> TypeSpec:
    return TypeSpec(name, code, Kind.SIGNED if signed else Kind.UNSIGNED, bits)


_ALL = [
    _f("FLOAT", 1, 8, 23, 127, Special.IEEE),
    _i("UINT8", 2, 8, False),
    _i("INT8", 3, 8, True),
    _i("UINT16", 4, 16, False),
    _i("INT16", 5, 16, True),
    _i("INT32", 6, 32, True),
    _i("INT64", 7, 64, True),
    TypeSpec("STRING", 8, Kind.STRING, 0),
    TypeSpec("BOOL", 9, Kind.BOOL, 1),
    _f("FLOAT16", 10, 5, 10, 15, Special.IEEE),
    _f("DOUBLE", 11, 11, 52, 1023, Special.IEEE),
    _i("UINT32", 12, 32, False),
    _i("UINT64", 13, 64, False),
    _f("BFLOAT16", 16, 8, 7, 127, Special.IEEE),
    _f("FLOAT8E4M3FN", 17, 4, 3, 7, Special.FN),
    _f("FLOAT8E4M3FNUZ", 18, 4, 3, 8, Special.FNUZ),
    _f("FLOAT8E5M2", 19, 5, 2, 15, Special.IEEE),
    _f("FLOAT8E5M2FNUZ", 20, 5, 2, 16, Special.FNUZ),
    _i("UINT4", 21, 4, False),
    _i("INT4", 22, 4, True),
    _f("FLOAT4E2M1", 23, 2, 1, 1, Special.FINITE),
    _f("FLOAT8E8M0", 24, 8, 0, 127, Special.E8M0),
    _i("UINT2", 25, 2, False),
    _i("INT2", 26, 2, True),
    _f("FLOAT6E2M3", 27, 2, 3, 1, Special.FINITE),
    _f("FLOAT6E3M2", 28, 3, 2, 3, Special.FINITE),
]

#: Every type by its :class:`OnnxType` code.
TYPES: dict[OnnxType, TypeSpec] = {OnnxType(t.code): t for t in _ALL}
#: Every type by its upper-case ONNX name.
TYPES_BY_NAME: dict[str, TypeSpec] = {t.name: t for t in _ALL}


def spec_of(t: OnnxType | int | str) -> TypeSpec:
    """The :class:`TypeSpec` of an :class:`OnnxType`, a code or an exact ONNX name."""
    if isinstance(t, str):
        return TYPES_BY_NAME[t]
    return TYPES[OnnxType(t)]
