"""The spec's tables against onnx and ml_dtypes, and the oracle on hand-checked values."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from castlike.backends.numpy import NUMPY_DTYPES
from castlike.spec.opsets import LATEST_OPSET, OPS, Op, version_for
from castlike.spec.reference import Exact, cast_value, decode, floor_log2
from castlike.spec.rules import Mode, Profile, RoundMode
from castlike.spec.types import TYPES, Kind, OnnxType, spec_of

pytestmark = pytest.mark.numpy_session

T = spec_of


# -- version tables vs onnx.defs --------------------------------------------------------------


def _onnx_types(schema) -> tuple[frozenset[str], frozenset[str]]:
    by_param = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}

    def names(strs):  # "tensor(float8e4m3fn)" -> "FLOAT8E4M3FN"
        return frozenset(s[len("tensor(") : -1].upper() for s in strs)

    return names(by_param["T1"]), names(by_param["T2"])


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.value)
def test_versions_match_onnx_defs(op: Op) -> None:
    defs = pytest.importorskip("onnx.defs", reason="onnx is not installed")
    onnx = pytest.importorskip("onnx", reason="onnx is not installed")
    latest = defs.onnx_opset_version()
    if latest > LATEST_OPSET:  # a newer onnx: its newest opset must bring no new version
        newest = defs.get_schema(op.value, latest).since_version
        assert newest == OPS[op][-1].since, f"onnx has {op.value}-{newest}, castlike does not"
    # An older onnx (the lowest the onnx extra allows) is checked on the opsets it knows.
    for opset in range(1, min(latest, LATEST_OPSET) + 1):
        ours = version_for(op, opset)
        try:
            schema = defs.get_schema(op.value, opset)
        except onnx.defs.SchemaError:
            assert ours is None, f"{op.value} does not exist at opset {opset} in onnx"
            continue
        assert ours is not None, f"onnx has {op.value} at opset {opset}"
        assert ours.since == schema.since_version
        t1, t2 = _onnx_types(schema)
        names = frozenset(t.name for t in ours.types)
        assert t1 == names and t2 == names, (op, opset, t1 ^ names)
        assert set(schema.attributes) - {"to"} == set(ours.attributes)
        for attr in ours.attributes:
            default = schema.attributes[attr].default_value
            if attr == "saturate":
                assert default.i == 1
            else:
                assert default.s == b"up"


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.value)
def test_version_table_is_consistent(op: Op) -> None:
    """Invariants of the table that hold without onnx installed (onnx itself is checked above)."""
    versions = OPS[op]
    assert [v.since for v in versions] == sorted({v.since for v in versions})
    for older, newer in itertools.pairwise(versions):
        assert older.types <= newer.types, f"{newer.label} drops {older.types - newer.types}"
        assert older.attributes <= newer.attributes
    fnuz = {OnnxType.FLOAT8E4M3FNUZ, OnnxType.FLOAT8E5M2FNUZ}
    for v in versions:
        if v.inf_to_fnuz_is_nan:  # a rule about saturate=0 into FNUZ types needs both
            assert fnuz <= v.types and "saturate" in v.attributes, v.label
    if op is Op.CAST_LIKE:  # CastLike follows Cast: same types at every opset it exists at
        for v in versions:
            assert version_for(Op.CAST, v.since).types == v.types, v.label


def test_type_codes_match_onnx() -> None:
    onnx = pytest.importorskip("onnx", reason="onnx is not installed")
    latest = onnx.defs.onnx_opset_version()
    for t in TYPES.values():
        if hasattr(onnx.TensorProto, t.name):
            assert getattr(onnx.TensorProto, t.name) == t.code
        else:  # only a type of an opset newer than the installed onnx may be missing
            first = next(v.since for v in OPS[Op.CAST] if OnnxType(t.code) in v.types)
            assert first > latest, f"onnx lacks {t.name}, which Cast-{first} has"


# -- formats vs ml_dtypes -------------------------------------------------------------------------


@pytest.mark.parametrize("t", [t for t in TYPES.values() if t.is_float], ids=lambda t: t.name)
def test_float_formats_match_ml_dtypes(t) -> None:
    import ml_dtypes

    dtype = NUMPY_DTYPES[OnnxType(t.code)]
    info = ml_dtypes.finfo(dtype)
    fmt = t.fmt
    assert Fraction(float(info.max)) == fmt.max_value
    assert Fraction(float(info.smallest_normal)) == fmt.min_normal
    if fmt.mantissa_bits:
        assert Fraction(float(info.smallest_subnormal)) == fmt.min_subnormal
    assert info.nmant == fmt.mantissa_bits


@pytest.mark.parametrize(
    "t", [t for t in TYPES.values() if t.is_float and t.bits <= 16], ids=lambda t: t.name
)
def test_decode_matches_ml_dtypes_for_every_pattern(t) -> None:
    dtype = NUMPY_DTYPES[OnnxType(t.code)]
    storage = np.dtype(f"uint{t.storage_bits}")
    with np.errstate(invalid="ignore"):  # signalling NaN patterns warn on the way to DOUBLE
        values = np.arange(1 << t.bits, dtype=storage).view(dtype).astype(np.float64)
    for bits, v in enumerate(values):
        exact = decode(bits, t)
        if np.isnan(v):
            assert exact.is_nan, hex(bits)
        elif np.isinf(v):
            assert exact.is_inf and exact.negative == (v < 0), hex(bits)
        else:
            assert exact.kind == "finite" and exact.signed_value == Fraction(float(v))
            assert exact.negative == bool(np.signbit(v)), hex(bits)


@pytest.mark.parametrize("t", [t for t in TYPES.values() if t.is_integer], ids=lambda t: t.name)
def test_integer_ranges(t) -> None:
    import ml_dtypes

    info = ml_dtypes.iinfo(NUMPY_DTYPES[OnnxType(t.code)])
    assert (info.min, info.max) == (t.int_min, t.int_max)


# -- oracle on hand-checked values -------------------------------------------------------------


def bits(value, source="DOUBLE", target="FLOAT8E4M3FN", **mode) -> int:
    v = value if isinstance(value, Exact) else Exact.of(value)
    return cast_value(v, T(source), T(target), Mode(**mode))


def test_float8_table_r4() -> None:
    assert [bits(v) for v in ("0.1", 448, 500, 1000000)] == [0x1D, 0x7E, 0x7E, 0x7E]
    assert bits(Exact.nan()) == 0x7F and bits(Exact.nan(True)) == 0xFF
    assert bits(Exact.inf()) == 0x7E and bits(Exact.inf(True)) == 0xFE
    no = {"saturate": False}
    assert [bits(v, **no) for v in ("0.1", 448, 500, 1000000)] == [0x1D, 0x7E, 0x7F, 0x7F]
    assert bits(Exact.inf(True), **no) == 0xFF and bits(-1000000, **no) == 0xFF
    # [x] > max is judged after rounding: 464 ties down to 448, 465 rounds up to 480 > max.
    assert bits(464, **no) == 0x7E and bits(465, **no) == 0x7F
    assert bits(Exact("finite", True), target="FLOAT8E4M3FNUZ") == 0x00
    assert bits(Exact.inf(), target="FLOAT8E5M2", **no) == 0x7C
    assert bits(Exact.nan(True), target="FLOAT8E5M2") == 0xFE


def test_fnuz_inf_changes_at_opset_24() -> None:
    old = {"inf_to_fnuz_is_nan": True}
    assert bits(Exact.inf(), target="FLOAT8E4M3FNUZ", **old) == 0x80
    assert bits(Exact.inf(), target="FLOAT8E4M3FNUZ") == 0x7F
    # The reference profile gives max at every version.
    for ref in (Profile.REFERENCE_ML_DTYPES_0_5, Profile.REFERENCE_ML_DTYPES_0_7):
        assert bits(Exact.inf(), target="FLOAT8E5M2FNUZ", profile=ref, **old) == 0x7F


def test_single_rounding_from_double() -> None:
    x = Fraction(1) + Fraction(1, 16) + Fraction(1, 2**40)
    assert decode(bits(x), T("FLOAT8E4M3FN")).signed_value == Fraction(9, 8)
    # ml_dtypes before 0.7 rounds through FLOAT first (R12); 0.7 rounds once.
    assert (
        decode(bits(x, profile=Profile.REFERENCE_ML_DTYPES_0_5), T("FLOAT8E4M3FN")).signed_value
        == 1
    )
    assert decode(
        bits(x, profile=Profile.REFERENCE_ML_DTYPES_0_7), T("FLOAT8E4M3FN")
    ).signed_value == Fraction(9, 8)


def test_finite_only_formats_r5() -> None:
    f4 = {"target": "FLOAT4E2M1"}
    assert bits(Exact.nan(), **f4) == 0x7 and bits(Exact.nan(True), **f4) == 0x7
    assert bits(Exact.inf(True), **f4) == 0xF and bits(100, **f4) == 0x7
    assert bits(Exact("finite", True), **f4) == 0x8
    assert bits(Exact.nan(), profile=Profile.REFERENCE_ML_DTYPES_0_7, **f4) == 0x8  # ml_dtypes: -0
    assert bits(Exact.nan(), target="FLOAT6E2M3") == 0x1F


def test_e8m0_r6() -> None:
    e = {"target": "FLOAT8E8M0"}
    assert bits(3, **e) == 129 and bits(3, round_mode=RoundMode.DOWN, **e) == 128
    assert bits(3, round_mode=RoundMode.NEAREST, **e) == 129  # 1.5 * 2 ties up
    assert bits(Fraction(5, 2), round_mode=RoundMode.NEAREST, **e) == 128
    assert bits(0, **e) == 0x00 and bits(0, saturate=False, **e) == 0xFF
    assert bits(Exact.inf(), **e) == 0xFE and bits(Exact.inf(), saturate=False, **e) == 0xFF
    assert bits(-1, **e) == 0xFF and bits(Exact("finite", True), **e) == 0x00
    assert bits(Fraction(1, 2**200), **e) == 0x00
    assert bits(Fraction(1, 2**200), saturate=False, **e) == 0xFF
    assert bits(2**127 + 1, **e) == 0xFE and bits(2**127 + 1, saturate=False, **e) == 0xFF


@pytest.mark.parametrize("round_mode", list(RoundMode), ids=lambda r: r.value)
def test_e8m0_range_is_judged_on_x_itself(round_mode: RoundMode) -> None:
    """R6: x > 2**127 or 0 < x < 2**-127 is out of range in every round_mode, even where
    rounding would bring it back (2e38 rounds down or to nearest to 2**127)."""
    e = {"target": "FLOAT8E8M0", "round_mode": round_mode}
    above, below = Fraction(2 * 10**38), Fraction(3, 4) / 2**127
    assert bits(above, saturate=False, **e) == 0xFF and bits(above, **e) == 0xFE
    assert bits(below, saturate=False, **e) == 0xFF and bits(below, **e) == 0x00
    assert bits(Fraction(3, 2) * 2**127, **e) == 0xFE
    # The ends themselves are in range.
    assert bits(2**127, saturate=False, **e) == 0xFE
    assert bits(Fraction(1, 2**127), saturate=False, **e) == 0x00


def test_e8m0_examples_of_r6() -> None:
    e = {"target": "FLOAT8E8M0"}
    nearest, down = RoundMode.NEAREST, RoundMode.DOWN
    assert bits(Fraction(2 * 10**38), round_mode=nearest, saturate=False, **e) == 0xFF
    assert bits(Fraction(3, 4) / 2**127, round_mode=nearest, saturate=False, **e) == 0xFF
    assert bits(Fraction(3, 2) * 2**127, round_mode=down, **e) == 0xFE


def test_integers_r7_r8() -> None:
    assert bits(Fraction(-27, 10), target="INT64") == (-2) & (2**64 - 1)
    assert bits(2**63 - 1024, target="INT64") == 2**63 - 1024
    assert bits(2**63, target="INT64") == 2**63 - 1
    assert bits(Exact.nan(), target="INT32") == 0
    assert bits(Exact.inf(True), target="INT8") == 0x80
    assert bits(9, target="INT4") == 0x9 and bits(Fraction(5, 2), target="INT4") == 2
    assert bits(Fraction(7, 2), target="INT4") == 4
    assert bits(Fraction(7, 2), target="INT4", profile=Profile.REFERENCE_ML_DTYPES_0_5) == 3
    assert bits(-1, target="UINT2") == 3
    assert bits(200, source="INT16", target="INT8") == (-56) & 0xFF
    assert bits(2**64 - 1, source="UINT64", target="FLOAT") == 0x5F800000
    assert bits(2**64 - 1, source="UINT64", target="FLOAT8E4M3FN") == 0x7E
    assert bits(Exact.nan(), target="BOOL") == 1 and bits(Exact("finite", True), target="BOOL") == 0


def test_legacy_bfloat16_truncates() -> None:
    # FLOAT 0x3F80C000: the lower 16 bits are above half an ulp of BFLOAT16.
    value = decode(0x3F80C000, T("FLOAT"))
    assert cast_value(value, T("FLOAT"), T("BFLOAT16"), Mode()) == 0x3F81
    assert cast_value(value, T("FLOAT"), T("BFLOAT16"), Mode(profile=Profile.LEGACY)) == 0x3F80


def test_floor_log2() -> None:
    for k in range(-300, 300, 7):
        q = Fraction(2) ** k
        assert floor_log2(q) == k
        assert floor_log2(q * Fraction(3, 2)) == k
        assert floor_log2(q - q / 1024) == k - 1


def test_every_type_has_a_kind() -> None:
    assert {t.kind for t in TYPES.values()} == set(Kind)
    assert len(TYPES) == 26
