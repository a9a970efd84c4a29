"""String casts (rules R9, R12): the fast paths of castlike.strings against the exact rules of
castlike.spec.strings, numpy and onnx.reference, plus the seed's examples and the ONNX node
data shipped inside the onnx 1.14.1, 1.16.2 and 1.18.0 wheels."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import castlike
from castlike import strings as fast
from castlike.backends import adapter_named, moves_strings
from castlike.backends.numpy import ADAPTER as NUMPY
from castlike.errors import BackendTypeError, CastError, InvalidStringError
from castlike.spec import strings as oracle
from castlike.spec.reference import decode
from castlike.spec.rules import Mode, Profile, RoundMode
from castlike.spec.types import TYPES, OnnxType, Special, TypeSpec, spec_of
from castlike.testing import numeric_types

SD = np.dtypes.StringDType()
FLOATS = [t for t in numeric_types() if t.is_float]
SMALL = [t for t in numeric_types() if t.bits <= 16]
SPEC, REFERENCE, LEGACY = (
    Mode(profile=p) for p in (Profile.SPEC, Profile.REFERENCE_ML_DTYPES_0_7, Profile.LEGACY)
)
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _name(t: TypeSpec) -> str:
    return t.name


def _bits(x: Any, t: TypeSpec) -> list[int]:
    return NUMPY.bits(np.asarray(x).reshape(-1), t).astype(np.uint64).tolist()


def _same_bits(actual: Any, expected_bits: list[int | None], t: TypeSpec) -> None:
    """Bitwise comparison; IEEE targets of 16 bits or more compare NaN as "is NaN" (R3)."""
    got = _bits(actual, t)
    ieee = t.is_float and t.fmt.special is Special.IEEE and t.bits >= 16
    for i, (g, e) in enumerate(zip(got, expected_bits, strict=True)):
        if ieee and e is not None and t.fmt.is_nan_bits(e) and t.fmt.is_nan_bits(g):
            continue
        assert g == e, f"element {i}: got 0x{g:X}, expected {e if e is None else hex(e)}"


# -- the seed: CastLike-15 ----------------------------------------------------------------------

SEED_STRINGS = [
    "0.47892547",
    "0.48033667",
    "0.49968487",
    "0.81910545",
    "0.47031248",
    "0.816468",
    "0.21087195",
    "0.7229038",
    "NaN",
    "INF",
    "+INF",
    "-INF",
]


@pytest.mark.parametrize("profile", ["spec", "legacy"])
def test_seed_string_to_float(profile: str) -> None:
    x = np.array(SEED_STRINGS, dtype=object).reshape(3, 4)
    like = np.zeros(1, np.float32)
    result = castlike.cast_like(x, like, opset=15, profile=profile)
    expected = x.astype(np.float32)  # what the page computes
    assert result.dtype == np.float32 and result.shape == (3, 4)
    _same_bits(result, _bits(expected, spec_of(OnnxType.FLOAT)), spec_of(OnnxType.FLOAT))


@pytest.mark.parametrize("profile", ["spec", "legacy"])
def test_seed_float_to_string(profile: str) -> None:
    x = np.random.default_rng(0).random((3, 4)).astype(np.float32)
    expected = np.array([str(v) for v in x.flatten()]).astype(object).reshape(3, 4)
    like = expected.flatten()[0:1]
    result = castlike.cast_like(x, like, opset=15, profile=profile)
    assert result.dtype == object and result.shape == (3, 4)
    assert result.tolist() == expected.tolist()


def test_seed_example_0_7229038() -> None:
    assert castlike.cast(np.float32(0.7229038), "STRING") == "0.7229038"


# -- ONNX node data of older wheels ---------------------------------------------------------------

NODE_VERSIONS = ["1.14.1", "1.16.2", "1.18.0"]
NODE_CASES = [
    "test_cast_FLOAT_to_STRING",
    "test_cast_STRING_to_FLOAT",
    "test_castlike_FLOAT_to_STRING",
    "test_castlike_STRING_to_FLOAT",
    "test_castlike_FLOAT_to_STRING_expanded",
    "test_castlike_STRING_to_FLOAT_expanded",
]


def _node_dir(version: str, name: str) -> Path:
    from castlike.onnx_data import wheel_node_dirs

    try:
        dirs = wheel_node_dirs(version)
    except RuntimeError as exc:  # pip could not download the wheel (no network, no pip)
        pytest.skip(f"the onnx {version} wheel is not available: {exc}")
    found = [d for d in dirs if d.name == name]
    assert found, f"{name} is missing from the onnx {version} wheel"
    return found[0]


def _run_node(case: Any, profile: str) -> Any:
    from onnx import helper, numpy_helper

    inputs = [numpy_helper.to_array(t) for t in case.inputs]
    attrs = {a.name: helper.get_attribute_value(a) for a in case.node.attribute}
    options = {"opset": case.opset, "profile": profile}
    if "saturate" in attrs:
        options["saturate"] = bool(attrs["saturate"])
    if case.node.op_type == "CastLike":
        return castlike.cast_like(inputs[0], inputs[1], **options)
    return castlike.cast(inputs[0], int(attrs["to"]), **options)


@pytest.mark.parametrize("profile", ["legacy", "spec"])
@pytest.mark.parametrize("name", NODE_CASES)
@pytest.mark.parametrize("version", NODE_VERSIONS)
def test_onnx_wheel_node_data(version: str, name: str, profile: str) -> None:
    """Bit for bit (text for STRING) with the data each wheel ships.  Legacy is the profile
    of onnx <= 1.18; the spec profile agrees on these values too."""
    pytest.importorskip("onnx", reason="reading the node data needs the onnx package")
    from onnx import numpy_helper

    from castlike.onnx_data import load_node_dir

    case = load_node_dir(_node_dir(version, name), origin=f"onnx {version} wheel")
    expected = numpy_helper.to_array(case.outputs[0])
    result = _run_node(case, profile)
    assert result.shape == expected.shape
    if expected.dtype.kind in "OUST":
        assert result.dtype.kind in "OUST"
        assert [str(v) for v in result.reshape(-1).tolist()] == [
            v.decode() if isinstance(v, bytes) else str(v) for v in expected.reshape(-1).tolist()
        ]
    else:
        t = TYPES[castlike.onnx_type(expected.dtype)]
        assert castlike.onnx_type(result.dtype) == t.code
        _same_bits(result, _bits(expected, t), t)


# -- worked examples -------------------------------------------------------------------------------


def test_int64_examples() -> None:
    result = castlike.cast(
        np.array(["100.5", "-2.7", "1e3", "9223372036854775807", " 7 "]), "INT64"
    )
    assert result.dtype == np.int64
    assert result.tolist() == [100, -2, 1000, 9223372036854775807, 7]


def test_hello_world_raises_with_index_and_text() -> None:
    with pytest.raises(CastError, match=r"'Hello World!'.*index \(0,\)") as info:
        castlike.cast(np.array(["Hello World!"]), "FLOAT")
    assert isinstance(info.value, InvalidStringError)
    assert isinstance(info.value, ValueError)


def test_hello_world_coerces_to_nan() -> None:
    result = castlike.cast(np.array(["Hello World!"]), "FLOAT", errors="coerce")
    assert result.dtype == np.float32 and np.isnan(result).all()


# -- number -> STRING: the rules ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "dtype", "text"),
    [
        (0.7229038, np.float32, "0.7229038"),
        (0.1, np.float32, "0.1"),
        (0.1, np.float64, "0.1"),
        (-0.0, np.float32, "-0.0"),
        (0.0, np.float16, "0.0"),
        (math.nan, np.float32, "NaN"),
        (math.inf, np.float64, "INF"),
        (-math.inf, np.float16, "-INF"),
        (1e16, np.float64, "1e+16"),
        (9999999999999998.0, np.float64, "9999999999999998.0"),
        (1e-4, np.float64, "0.0001"),
        (1.5e-5, np.float64, "1.5e-05"),
        (123456789.0, np.float32, "123456790.0"),  # FLOAT's shortest digits, repr's layout
        (1e-4, np.float32, "0.0001"),  # the decimal printed decides the layout, as in repr
        (5e-324, np.float64, "5e-324"),  # shortest, not the JDK's two digits
        (0.1, ml_dtypes.bfloat16, "0.1"),
        (448.0, ml_dtypes.float8_e4m3fn, "450.0"),  # shortest that reads back to 448
        (0.1015625, ml_dtypes.float8_e4m3fn, "0.1"),
        (6.0, ml_dtypes.float4_e2m1fn, "6.0"),
        (7.5, ml_dtypes.float6_e2m3fn, "7.5"),
        (2.0**-10, ml_dtypes.float8_e8m0fnu, "0.0009765625"),  # E8M0: exact
        (-8, ml_dtypes.int4, "-8"),
        (3, ml_dtypes.uint2, "3"),
        (-(2**63), np.int64, "-9223372036854775808"),
        (2**64 - 1, np.uint64, "18446744073709551615"),
        (True, np.bool_, "1"),
        (False, np.bool_, "0"),
    ],
)
def test_number_to_string_examples(value: Any, dtype: Any, text: str) -> None:
    x = np.array([value], dtype=dtype)
    result = castlike.cast(x, "STRING")
    assert result.dtype == SD
    assert result.tolist() == [text]


@pytest.mark.slow
@pytest.mark.parametrize("style", ["spec", "numpy"])
@pytest.mark.parametrize("t", SMALL, ids=_name)
def test_format_every_pattern(t: TypeSpec, style: str) -> None:
    """Every pattern of every type of 16 bits or fewer, both styles, against the oracle."""
    patterns = np.arange(1 << t.bits, dtype=np.dtype(f"uint{t.storage_bits}"))
    if t.bits == 16 and style == "numpy" and t.code == OnnxType.FLOAT16:
        expected = NUMPY.from_bits(patterns, t).astype(str).tolist()  # numpy itself
    elif t.bits == 16 and t.is_float:
        # The exact oracle takes seconds here: check an even sample plus both ends.
        patterns = np.unique(np.concatenate([patterns[::7], patterns[:512], patterns[-512:]]))
        expected = [oracle.format_bits(b, t, style) for b in patterns.tolist()]
    else:
        expected = [oracle.format_bits(b, t, style) for b in patterns.tolist()]
    got = fast.format_numbers(NUMPY.from_bits(patterns, t), t, style=style).tolist()
    pairs = zip(patterns.tolist(), got, expected, strict=True)
    bad = [(hex(b), g, e) for b, g, e in pairs if g != e]
    assert not bad, f"{len(bad)} patterns differ, e.g. {bad[:5]}"


@pytest.mark.parametrize("style", ["spec", "numpy"])
@pytest.mark.parametrize("t", SMALL, ids=_name)
def test_few_values_format_like_the_pattern_table(t: TypeSpec, style: str) -> None:
    """A short array formats only the patterns it holds (so that a first cast need not lay
    out all 65,536 texts); every text equals the one of the whole-type table."""
    from castlike.strings import _format

    rng = np.random.default_rng(t.code)
    count = max(1, (1 << t.bits) // _format._FEW - 1)  # below the whole-table threshold
    patterns = rng.integers(0, 1 << t.bits, size=count).astype(f"uint{t.storage_bits}")
    patterns[: min(count, 2)] = [0, (1 << t.bits) - 1][: min(count, 2)]  # both ends
    few = fast.format_numbers(NUMPY.from_bits(patterns, t), t, style=style)
    table = _format._pattern_text(t, style)[patterns.astype(np.intp)].astype(str).tolist()
    assert few.tolist() == table


@pytest.mark.parametrize("width", [20, 24])
def test_text_templates_fill_only_the_blocks_asked_for(width: int) -> None:
    """The layout templates are filled one (sign, layout, digit count) block at a time; a
    block filled on its own equals the same block of a table filled all at once, and no other
    block is touched."""
    from castlike.strings import _format

    full = _format._Templates(width).table(np.arange(_format._BLOCKS))
    blank = _format._Templates(width)
    untouched = blank.rows.copy()
    picked = np.array([7, 7, 50, 125])
    partial = blank.table(picked).reshape(_format._BLOCKS, -1, width)
    full = full.reshape(_format._BLOCKS, -1, width)
    for block in range(_format._BLOCKS):
        expected = full[block] if block in picked else untouched[block]
        assert np.array_equal(partial[block], expected), block
    assert blank.filled.tolist() == [b in picked for b in range(_format._BLOCKS)]


def _pattern_strategy(t: TypeSpec) -> st.SearchStrategy[int]:
    return st.integers(0, (1 << t.bits) - 1)


@PROPERTY
@given(data=st.data())
@pytest.mark.parametrize("t", FLOATS, ids=_name)
def test_round_trip(t: TypeSpec, data: st.DataObject) -> None:
    """R9: cast(cast(v, STRING), type(v)) has v's bits (NaN as NaN), and the text is the
    oracle's.  Read back with ``saturate=False``: with the default, R4 turns FLOAT8E5M2's
    +-Inf into +-max, text or not (see test_e5m2_inf_saturates_by_default)."""
    patterns = data.draw(st.lists(_pattern_strategy(t), min_size=1, max_size=8))
    storage = np.dtype(f"uint{t.storage_bits}")
    x = NUMPY.from_bits(np.array(patterns, dtype=storage), t)
    text = castlike.cast(x, "STRING")
    assert text.tolist() == [oracle.format_bits(b, t) for b in patterns]
    back = castlike.cast(text, t.name, saturate=False)
    finite = [b for b in patterns if decode(b, t).kind == "finite"]
    if finite:  # finite values read back under the default options too
        again = castlike.cast(
            castlike.cast(NUMPY.from_bits(np.array(finite, dtype=storage), t), "STRING"), t.name
        )
        _same_bits(again, finite, t)
    expected = []
    for b in patterns:
        value = decode(b, t)
        expected.append(t.fmt.nan_bits(False) if value.is_nan else b)
    _same_bits(back, expected, t)


def test_e5m2_inf_saturates_by_default() -> None:
    t = spec_of(OnnxType.FLOAT8E5M2)
    text = castlike.cast(NUMPY.from_bits(np.array([0x7C, 0xFC], np.uint8), t), "STRING")
    assert text.tolist() == ["INF", "-INF"]
    assert _bits(castlike.cast(text, t.name), t) == [0x7B, 0xFB]  # R4: Inf -> +-max
    assert _bits(castlike.cast(text, t.name, saturate=False), t) == [0x7C, 0xFC]


@pytest.mark.parametrize("round_mode", list(RoundMode), ids=lambda r: r.value)
def test_e8m0_round_trip_every_round_mode(round_mode: RoundMode) -> None:
    """E8M0 values are written exactly, so they read back under every round_mode."""
    t = spec_of(OnnxType.FLOAT8E8M0)
    x = NUMPY.from_bits(np.arange(255, dtype=np.uint8), t)
    back = castlike.cast(castlike.cast(x, "STRING"), t.name, round_mode=round_mode.value)
    assert _bits(back, t) == list(range(255))


@PROPERTY
@given(bits=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=20))
def test_double_text_is_python_repr(bits: list[int]) -> None:
    x = np.array(bits, dtype=np.uint64).view(np.float64)
    finite = np.isfinite(x)
    got = castlike.cast(x, "STRING").tolist()
    for value, text, ok in zip(x.tolist(), got, finite.tolist(), strict=True):
        if ok:
            assert text == repr(value)


@PROPERTY
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=20))
def test_float_digits_are_numpy_str(bits: list[int]) -> None:
    """R9's example: the same digits as str(numpy.float32(v)) (and its text in full under the
    reference profile)."""
    x = np.array(bits, dtype=np.uint32).view(np.float32)
    assert castlike.cast(x, "STRING", profile="reference").tolist() == x.astype(str).tolist()
    for text, value in zip(castlike.cast(x, "STRING").tolist(), x.tolist(), strict=True):
        if math.isfinite(value):
            assert _digits(text) == _digits(str(np.float32(value)))


def _digits(text: str) -> str:
    """The significant digits of a decimal's text."""
    return text.split("e")[0].replace("-", "").replace(".", "").strip("0")


# -- STRING -> number: the rules ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "target", "expected"),
    [
        ("100.5", "INT8", 100),
        ("-2.7", "INT8", -2),
        ("1e3", "INT16", 1000),
        ("300", "INT8", 127),  # saturation (R7)
        ("-300", "UINT8", 0),
        ("1" + "0" * 400, "INT64", 2**63 - 1),
        ("18446744073709551615", "UINT64", 2**64 - 1),
        ("18446744073709551616", "UINT64", 2**64 - 1),
        ("-9223372036854775808", "INT64", -(2**63)),
        ("9223372036854775807.999", "INT64", 2**63 - 1),
        ("1e400", "INT32", 2**31 - 1),
        ("nan", "INT32", 0),
        ("-inf", "INT16", -(2**15)),
        ("9", "INT4", -7),  # round, then the low 4 bits (R7)
        ("2.5", "INT4", 2),  # half to even
        ("3.5", "UINT4", 4),
        ("-1", "UINT2", 3),
        ("2e308", "INT4", 0),  # at DOUBLE's overflow threshold or more: Inf, and R7 Inf -> 0
        ("1e300", "INT4", 0),  # exact: a multiple of 16
        ("0.000", "BOOL", False),
        ("1e-400", "BOOL", True),  # read exactly: not zero
        ("nan", "BOOL", True),
        ("TRUE", "BOOL", True),
        (" false ", "BOOL", False),
    ],
)
def test_string_to_integer_examples(text: str, target: str, expected: int) -> None:
    result = castlike.cast(np.array([text]), target)
    assert result.tolist() == [expected]


@pytest.mark.parametrize(
    ("text", "target", "expected_bits"),
    [
        ("1e400", "FLOAT", 0x7F800000),
        ("-1e400", "DOUBLE", 0xFFF0000000000000),
        ("1e-400", "FLOAT", 0x00000000),
        ("-1e-400", "FLOAT16", 0x8000),
        ("0.1", "BFLOAT16", 0x3DCD),
        ("1e400", "FLOAT8E4M3FN", 0x7E),  # Inf, then saturate to max
        ("-nan", "FLOAT8E4M3FN", 0xFF),  # the sign of NaN is kept (R4)
        ("1e400", "FLOAT4E2M1", 0x7),
        ("nan", "FLOAT4E2M1", 0x7),  # R5: NaN -> +max
        ("0", "FLOAT8E8M0", 0x00),
        ("-1e-400", "FLOAT8E8M0", 0xFF),  # R6: x < 0 -> NaN, even when tiny
        ("1.0000000000000000000001", "FLOAT8E8M0", 0x80),  # round_mode up from just above 1
        (str(2**128 - 2**103), "FLOAT", 0x7F800000),  # the overflow tie rounds to Inf
        (str(2**128 - 2**103 - 1), "FLOAT", 0x7F7FFFFF),
        (str(2**1024 - 2**970), "DOUBLE", 0x7FF0000000000000),  # the first read as Inf
        (str(2**1024 - 2**970 - 1), "DOUBLE", 0x7FEFFFFFFFFFFFFF),
        (str(2**1024 - 2**970) + ".0", "FLOAT8E4M3FNUZ", 0x7F),  # Inf -> max (opset 25)
    ],
)
def test_string_to_float_examples(text: str, target: str, expected_bits: int) -> None:
    t = TYPES[castlike.onnx_type(target)]
    _same_bits(castlike.cast(np.array([text]), target), [expected_bits], t)


def test_one_e_400_is_inf_before_the_fnuz_rules() -> None:
    """R9: "1e400" -> +Inf before float8 rules; at opsets 19-23 Inf -> FNUZ is NaN, while a
    finite value beyond max saturates."""
    result = castlike.cast(np.array(["1e400", "1e300"]), "FLOAT8E4M3FNUZ", opset=21)
    assert _bits(result, spec_of(OnnxType.FLOAT8E4M3FNUZ)) == [0x80, 0x7F]


def test_parse_is_single_rounding() -> None:
    """A decimal just above a FLOAT tie whose nearest DOUBLE is the tie itself: reading via
    DOUBLE would round twice (and to even); the spec rounds once, up."""
    tie = Fraction(1) + Fraction(1, 2**24)  # between 1 and 1 + 2**-23
    text = str(Decimal(tie.numerator) / Decimal(tie.denominator)) + "00000000000000000001"
    assert float(text) == float(tie)
    spec = castlike.cast(np.array([text]), "FLOAT")
    reference = castlike.cast(np.array([text]), "FLOAT", profile="reference")
    assert _bits(spec, spec_of(OnnxType.FLOAT)) == [0x3F800001]
    assert _bits(reference, spec_of(OnnxType.FLOAT)) == [0x3F800000]


INVALID = [
    "Hello World!",
    "",
    " ",
    ".",
    "+",
    "e5",
    "1e",
    "1e+",
    "1_000",
    "0x1p3",
    "1.5.5",
    "+-1",
    "1e5.5",
    "1 000",
    "١٢",
    "\u20071",
    "nan(1)",
    "infinit",
    "1d5",
    "--1",
    "1f",
    "\x001",
    "1\x001",
]


@pytest.mark.parametrize("text", INVALID, ids=repr)
@pytest.mark.parametrize("target", ["FLOAT", "DOUBLE", "INT32", "FLOAT8E4M3FN", "BOOL"])
def test_invalid_strings_raise(text: str, target: str) -> None:
    x = np.array(["1", "2", text], dtype=SD)
    with pytest.raises(InvalidStringError, match=r"index \(2,\)"):
        castlike.cast(x, target)


@pytest.mark.parametrize(
    "target",
    [
        "FLOAT",
        "FLOAT16",
        "BFLOAT16",
        "DOUBLE",
        "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ",
        "FLOAT8E5M2",
        "FLOAT8E5M2FNUZ",
        "FLOAT8E8M0",
    ],
)
def test_coerce_gives_the_targets_nan(target: str) -> None:
    t = TYPES[castlike.onnx_type(target)]
    result = castlike.cast(np.array(["1", "oops"]), target, errors="coerce")
    nan = t.fmt.nan_bits(False)
    assert nan is not None
    _same_bits(result[1:], [nan], t)


@pytest.mark.parametrize(
    "target", ["INT8", "UINT64", "BOOL", "INT4", "FLOAT4E2M1", "FLOAT6E2M3", "FLOAT6E3M2"]
)
def test_coerce_into_a_target_without_nan_raises(target: str) -> None:
    with pytest.raises(InvalidStringError, match=r"index \(1,\).*has no NaN"):
        castlike.cast(np.array(["1", "oops"]), target, errors="coerce")
    assert castlike.cast(np.array(["1"]), target, errors="coerce").shape == (1,)


def test_error_index_is_a_tuple_for_nd_input() -> None:
    with pytest.raises(InvalidStringError, match=r"'x' at index \(1, 0, 1\)"):
        castlike.cast(np.array([[["1", "2"]], [["3", "x"]]]), "FLOAT")


def test_errors_option_is_checked() -> None:
    with pytest.raises(castlike.CastValueError, match="errors"):
        castlike.cast(np.array(["1"]), "FLOAT", errors="ignore")


def test_objects_that_are_not_strings() -> None:
    # A number in an object array is not text: the array is no STRING tensor, whatever
    # errors says (coerce would silently make the number NaN).
    x = np.array(["1", 2.5], dtype=object)
    for errors in ("raise", "coerce"):
        with pytest.raises(
            castlike.UnsupportedTypeError,
            match=r"object array.*2.5 \(of type float\) at index \(1,\)",
        ):
            castlike.cast(x, "FLOAT", errors=errors)
    with pytest.raises(castlike.UnsupportedTypeError, match=r"at index \(1,\)"):
        castlike.cast(x, "STRING")


# -- STRING -> number against the oracle (property tests) -----------------------------------------

NEAR_TIE_TYPES = [
    spec_of(OnnxType[n])
    for n in (
        "FLOAT",
        "FLOAT16",
        "BFLOAT16",
        "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ",
        "FLOAT8E5M2",
        "FLOAT8E5M2FNUZ",
        "FLOAT4E2M1",
        "FLOAT6E2M3",
        "FLOAT6E3M2",
    )
]


@st.composite
def decimal_strings(draw: st.DrawFn) -> str:
    """Random R9 decimals: signs, leading zeros, a point anywhere, exponents, long digits."""
    sign = draw(st.sampled_from(["", "", "-", "+"]))
    digits = draw(st.text("0123456789", min_size=1, max_size=30))
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(digits)))
        digits = digits[:cut] + "." + digits[cut:]
    exponent = ""
    if draw(st.booleans()):
        exponent = (
            draw(st.sampled_from("eE"))
            + draw(st.sampled_from(["", "+", "-"]))
            + "0" * draw(st.integers(0, 4))  # leading zeros: up to 7 exponent digits
            + str(draw(st.integers(0, 400)))
        )
    return sign + digits + exponent


@st.composite
def near_ties(draw: st.DrawFn) -> str:
    """Decimals within one unit in the last place of a tie of a float type: the tie itself,
    a hair off it, and the 17-digit text of the DOUBLE nearest it."""
    t = draw(st.sampled_from(NEAR_TIE_TYPES))
    b = draw(st.integers(0, (1 << (t.bits - 1)) - 2))  # positive patterns
    low, high = decode(b, t), decode(b + 1, t)
    if low.kind != "finite" or high.kind != "finite":
        low, high = decode(0, t), decode(1, t)
    tie = (low.magnitude + high.magnitude) / 2
    ulp = high.magnitude - low.magnitude
    offset = draw(st.sampled_from([0, 1, -1])) * ulp * Fraction(1, 10 ** draw(st.integers(1, 30)))
    value = tie + offset
    with localcontext() as ctx:
        ctx.prec = 80
        text = str(Decimal(value.numerator) / Decimal(value.denominator))
    if draw(st.booleans()):
        text = f"{float(value):.17g}"
    return draw(st.sampled_from(["", "-"])) + text


def _check_parse(texts: list[str], target: TypeSpec, mode: Mode) -> None:
    expected = [oracle.string_to_bits(s, target, mode) for s in texts]
    assert all(e is not None for e in expected)
    result = fast.parse_strings(np.array(texts, dtype=SD), target, mode)
    _same_bits(result, expected, target)  # type: ignore[arg-type]


@PROPERTY
@given(texts=st.lists(st.one_of(decimal_strings(), near_ties()), min_size=1, max_size=30))
def test_parse_float_matches_the_oracle(texts: list[str]) -> None:
    _check_parse(texts, spec_of(OnnxType.FLOAT), SPEC)


@PROPERTY
@given(texts=st.lists(near_ties(), min_size=1, max_size=20), data=st.data())
def test_parse_near_ties_every_float_type(texts: list[str], data: st.DataObject) -> None:
    target = data.draw(st.sampled_from(FLOATS), label="target")
    saturate = data.draw(st.booleans(), label="saturate")
    profile = data.draw(st.sampled_from(list(Profile)), label="profile")
    round_mode = data.draw(st.sampled_from(list(RoundMode)), label="round_mode")
    _check_parse(texts, target, Mode(saturate=saturate, round_mode=round_mode, profile=profile))


@PROPERTY
@given(texts=st.lists(decimal_strings(), min_size=1, max_size=30), data=st.data())
def test_parse_every_numeric_type(texts: list[str], data: st.DataObject) -> None:
    target = data.draw(st.sampled_from(numeric_types()), label="target")
    profile = data.draw(st.sampled_from(list(Profile)), label="profile")
    _check_parse(texts, target, Mode(profile=profile))


@PROPERTY
@given(texts=st.lists(st.text(max_size=12), min_size=1, max_size=20), data=st.data())
def test_any_text_matches_the_oracle(texts: list[str], data: st.DataObject) -> None:
    """Arbitrary text in every kind of string array: valid or not, every element agrees with
    the oracle (coerce shows the invalid ones as NaN)."""
    target = data.draw(
        st.sampled_from(
            [spec_of(OnnxType.FLOAT), spec_of(OnnxType.DOUBLE), spec_of(OnnxType.FLOAT8E5M2)]
        ),
        label="target",
    )
    profile = data.draw(st.sampled_from(list(Profile)), label="profile")
    kind = data.draw(st.sampled_from(["T", "U", "O", "S"]), label="array kind")
    mode = Mode(profile=profile)
    nan = oracle.string_to_bits("nan", target, mode)
    if kind == "S":  # bytes: UTF-8
        items: list[Any] = [t.encode("utf-8", "surrogatepass") for t in texts]
        strings = np.array(items, dtype="S")
        items = strings.tolist()  # as numpy holds them (trailing NULs dropped)
    else:
        strings = np.array(texts, dtype={"T": SD, "U": str, "O": object}[kind])
        items = strings.tolist()
    expected = [oracle.string_to_bits(s, target, mode) for s in items]
    result = fast.parse_strings(strings, target, mode, errors="coerce")
    _same_bits(result, [nan if e is None else e for e in expected], target)


# -- inputs and outputs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strings",
    [
        np.array(["1.5", "-2", "nan"], dtype=SD),
        np.array(["1.5", "-2", "nan"]),
        np.array(["1.5", "-2", "nan"]).astype(">U4"),
        np.array([b"1.5", b"-2", b"nan"]),
        np.array(["1.5", "-2", "nan"], dtype=object),
        np.array([b"1.5", b"-2", b"nan"], dtype=object),
        np.array(["1.5", b"-2", "nan"], dtype=object),
    ],
    ids=["StringDType", "U", "U-big-endian", "S", "object-str", "object-bytes", "object-mixed"],
)
def test_every_kind_of_string_input(strings: np.ndarray) -> None:
    result = castlike.cast(strings, "DOUBLE")
    assert result.dtype == np.float64
    assert result[:2].tolist() == [1.5, -2.0] and np.isnan(result[2])


def test_non_utf8_bytes_are_invalid() -> None:
    with pytest.raises(InvalidStringError, match=r"\(0,\)"):
        castlike.cast(np.array([b"\xff1"]), "FLOAT")


def test_long_strings_and_shapes() -> None:
    texts = ["0." + "0" * 40 + "1", "1" * 50, " " * 40 + "7", "3"]
    x = np.array(texts, dtype=SD).reshape(2, 2)
    result = castlike.cast(x, "DOUBLE")
    assert result.shape == (2, 2)
    assert result.reshape(-1).tolist() == [float(t) for t in texts]
    assert castlike.cast(np.array([], dtype=SD), "FLOAT").shape == (0,)
    zero_d = castlike.cast(np.array("2.5"), "FLOAT")
    assert zero_d.shape == () and zero_d == 2.5


@pytest.mark.parametrize(
    ("like", "kind"),
    [
        (np.array(["x"]), "U"),
        (np.array([b"x"]), "S"),
        (np.array(["x"], dtype=object), "O"),
        (np.array(["x"], dtype=SD), "T"),
        ("STRING", "T"),
        (np.dtype("U"), "T"),
    ],
    ids=["U", "S", "object", "StringDType", "name", "dtype"],
)
def test_output_kind_follows_like(like: Any, kind: str) -> None:
    x = np.array([1.5, -0.0], dtype=np.float32)
    result = castlike.cast_like(x, like)
    assert result.dtype.kind == kind
    assert [v.decode() if isinstance(v, bytes) else v for v in result.tolist()] == ["1.5", "-0.0"]


def test_object_like_of_bytes_gives_bytes() -> None:
    like = np.array([b"x"], dtype=object)
    assert castlike.cast_like(np.array([2.0]), like).tolist() == [b"2.0"]


def test_string_to_string() -> None:
    x = np.array([b"a", "\u00e9"], dtype=object)
    assert castlike.cast(x, "STRING").tolist() == ["a", "\u00e9"]
    assert castlike.cast_like(np.array(["a"]), np.array([b"x"])).tolist() == [b"a"]


def test_scalars() -> None:
    assert castlike.cast(np.float64(0.3), "STRING") == "0.3"
    assert castlike.cast("2.5", "FLOAT") == 2.5
    assert castlike.cast(["1", "2"], "INT8").tolist() == [1, 2]


# -- backends: numbers from any library, strings like any library ---------------------------------


def _computed(result: Any, x: Any) -> np.ndarray:
    """R9: strings are NumPy arrays; R10: a lazy input (Dask) gives a lazy result of its own
    library, which computes to that NumPy array."""
    if isinstance(result, np.ndarray):
        return result
    assert type(result) is type(x) and hasattr(result, "compute"), type(result)
    computed = result.compute()
    assert isinstance(computed, np.ndarray)
    return computed


def _refused(adapter: Any, *calls: Callable[[], Any]) -> bool:
    """Whether the backend refuses STRING (R10: the generic Array-API backend moves no data
    between its library and NumPy, where strings live); if so, each call raises so."""
    if moves_strings(adapter):
        return False
    for call in calls:
        with pytest.raises(BackendTypeError, match=f"{adapter.name} cannot hold STRING"):
            call()
    return True


def test_numbers_of_a_backend_to_strings(backend: str) -> None:
    adapter = adapter_named(backend)
    x = adapter.from_numpy(np.array([0.1, -2.5, np.inf], dtype=np.float32))
    if _refused(
        adapter, lambda: castlike.cast(x, "STRING"), lambda: castlike.cast_like(x, np.array(["x"]))
    ):
        return
    result = _computed(castlike.cast(x, "STRING"), x)
    assert result.dtype == SD
    assert result.tolist() == ["0.1", "-2.5", "INF"]
    like = castlike.cast_like(x, np.array(["x"]))  # a NumPy string array pairs with any library
    like = _computed(like, x)
    assert like.dtype.kind == "U"
    assert like.tolist() == ["0.1", "-2.5", "INF"]


def test_dask_stays_lazy() -> None:
    """R10 for strings: a Dask array is cast block by block when computed, either way, and an
    invalid string in a later block is reported at its index in the whole array."""
    da = pytest.importorskip("dask.array", reason="dask is not installed")
    calls = []

    def count(block: np.ndarray) -> np.ndarray:
        if block.shape == (2,):  # a real block (dask may call it on made-up ones for types)
            calls.append(block.shape)
        return block

    x = da.from_array(np.array([1.5, 2.25, -3.0, 1e-7], np.float32), chunks=2).map_blocks(count)
    text = castlike.cast(x, "STRING")
    numbers = castlike.cast(text, "DOUBLE")
    assert calls == [] and isinstance(numbers, da.Array)
    assert numbers.compute().tolist() == [1.5, 2.25, -3.0, 1e-07]  # FLOAT text, read as DOUBLE
    strings = da.from_array(np.array(["1", "2", "3", "oops", "5"]), chunks=2)
    lazy = castlike.cast(strings, "FLOAT")
    with pytest.raises(InvalidStringError, match=r"'oops' at index \(3,\)"):
        lazy.compute()
    assert np.isnan(castlike.cast(strings, "FLOAT", errors="coerce").compute()[3])


def test_strings_like_a_backend_array(backend: str) -> None:
    adapter = adapter_named(backend)
    like = adapter.from_numpy(np.zeros(1, dtype=np.float32))
    texts = np.array(["0.1", "nan", "-7"], dtype=SD)
    if _refused(adapter, lambda: castlike.cast_like(texts, like)):
        return
    result = castlike.cast_like(texts, like)
    assert type(result) is type(like)
    if hasattr(like, "device"):
        assert result.device == like.device
    host = adapter.to_numpy(result)
    assert host.dtype == np.float32
    assert host[0] == np.float32(0.1) and np.isnan(host[1]) and host[2] == -7


@pytest.mark.parametrize(
    "target",
    [
        "FLOAT16",
        "BFLOAT16",
        "DOUBLE",
        "INT64",
        "UINT8",
        "BOOL",
        "FLOAT8E4M3FN",
        "FLOAT8E5M2",
        "INT4",
    ],
)
def test_strings_like_a_backend_array_of_each_type(backend: str, target: str) -> None:
    adapter = adapter_named(backend)
    t = TYPES[castlike.onnx_type(target)]
    if adapter.library_dtype(t) is None:
        pytest.skip(f"{backend} cannot hold {target}: {adapter.cannot_hold_hint(t)}")
    texts = np.array(["1.5", "-2", "7", "0"], dtype=SD)
    like = adapter.from_numpy(np.zeros(1, dtype=NUMPY.library_dtype(t)))
    if _refused(adapter, lambda: castlike.cast_like(texts, like)):
        return
    result = castlike.cast_like(texts, like)
    assert type(result) is type(like)
    expected = castlike.cast(texts, target)  # the NumPy answer
    assert _bits(adapter.to_numpy(result), t) == _bits(expected, t)


def test_traced_jax_array_to_string_is_an_error() -> None:
    jax = pytest.importorskip("jax", reason="jax is not installed")
    with pytest.raises(BackendTypeError, match="traced"):
        jax.jit(lambda a: castlike.cast(a, "STRING"))(jax.numpy.ones(2))


def test_torch_and_jax_device_and_library() -> None:
    """R9 with both other libraries at once (skipped where one is not installed)."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    jnp = pytest.importorskip("jax.numpy", reason="jax is not installed")
    t = castlike.cast(torch.tensor([1.25], dtype=torch.bfloat16), "STRING")
    assert isinstance(t, np.ndarray) and t.tolist() == ["1.25"]
    j = castlike.cast(jnp.asarray([0.5], dtype=jnp.float16), "STRING")
    assert isinstance(j, np.ndarray) and j.tolist() == ["0.5"]
    like = torch.zeros(1, dtype=torch.bfloat16)
    out = castlike.cast_like(np.array(["0.1"]), like)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    assert out.device == like.device
    jax_like = jnp.zeros(1, jnp.float16)
    jax_out = castlike.cast_like(np.array(["0.1"]), jax_like)
    assert type(jax_out) is type(jax_like) and jax_out.devices() == jax_like.devices()


# -- profiles (R12): reference and legacy format and parse as onnx.reference ----------------------


@pytest.mark.parametrize(
    ("value", "dtype", "spec_text", "reference_text"),
    [
        (math.nan, np.float32, "NaN", "nan"),
        (math.inf, np.float64, "INF", "inf"),
        (-math.inf, np.float16, "-INF", "-inf"),
        (1e-4, np.float32, "0.0001", "1e-04"),
        (1000.0, np.float16, "1000.0", "1e+03"),
        (1e6, np.float32, "1000000.0", "1e+06"),
        (1e16, np.float64, "1e+16", "1e+16"),
        (0.1, ml_dtypes.bfloat16, "0.1", "0.10009765625"),
        (True, np.bool_, "1", "True"),
    ],
)
def test_profile_format_differences(
    value: Any, dtype: Any, spec_text: str, reference_text: str
) -> None:
    x = np.array([value], dtype=dtype)
    assert castlike.cast(x, "STRING").tolist() == [spec_text]
    if x.dtype in (np.float16, np.float32, np.float64):
        # The reference text is the installed NumPy's; the examples are NumPy >= 2.3's (before,
        # FLOAT16 and FLOAT switched to scientific notation at 1e16 as DOUBLE does).
        numpy_text = x.astype(str).tolist()
        assert numpy_text == [reference_text] or np.lib.NumpyVersion(np.__version__) < "2.3.0"
        reference_text = numpy_text[0]
    for profile in ("reference", "legacy"):
        assert castlike.cast(x, "STRING", profile=profile).tolist() == [reference_text]


@pytest.mark.parametrize(
    ("text", "target", "spec", "reference"),
    [
        ("1_000", "FLOAT", None, 1000.0),  # Python's float() grammar
        ("\u00a01", "DOUBLE", None, 1.0),
        ("0", "BOOL", False, True),  # onnx.reference: the truth of the string
        ("false", "BOOL", False, True),
        ("", "BOOL", None, False),
    ],
)
def test_profile_parse_differences(text: str, target: str, spec: Any, reference: Any) -> None:
    x = np.array([text], dtype=SD)
    if spec is None:
        with pytest.raises(InvalidStringError):
            castlike.cast(x, target)
    else:
        assert castlike.cast(x, target).tolist() == [spec]
    for profile in ("reference", "legacy"):
        assert castlike.cast(x, target, profile=profile).tolist() == [reference]


def _reference_run(source: int, target: int, x: np.ndarray) -> np.ndarray:
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node("Cast", ["x"], ["y"], to=target)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", source, [None])],
        [helper.make_tensor_value_info("y", target, [None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    assert TensorProto.STRING == 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # its astype overflows on purpose
        return ReferenceEvaluator(model).run(None, {"x": x})[0]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("dtype", "code"),
    [(np.float16, 10), (np.float32, 1), (np.float64, 11), (np.int64, 7), (np.bool_, 9)],
)
def test_reference_profile_formats_as_onnx_reference(dtype: Any, code: int) -> None:
    pytest.importorskip("onnx.reference", reason="needs onnx")
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, 4000 * np.dtype(dtype).itemsize, dtype=np.uint8)
    x = raw.view(dtype) if dtype is not np.bool_ else raw[:4000] > 127
    expected = _reference_run(code, 8, x)
    got = castlike.cast(x, "STRING", profile="reference")
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize(
    ("target", "code"), [("FLOAT", 1), ("DOUBLE", 11), ("FLOAT16", 10), ("BOOL", 9)]
)
def test_reference_profile_parses_as_onnx_reference(target: str, code: int) -> None:
    pytest.importorskip("onnx.reference", reason="needs onnx")
    rng = np.random.default_rng(8)
    texts = [
        f"{m:.{d}e}"
        for m, d in zip(
            rng.standard_normal(3000) * 10.0 ** rng.integers(-40, 40, 3000),
            rng.integers(0, 20, 3000),
            strict=True,
        )
    ]
    texts += ["nan", "-inf", "1_5", " 2 ", "0", "1e-400", "0.1", "\u00a03"]
    if target == "BOOL":
        texts += ["", "false", "abc"]  # onnx.reference reads any string as its truth
    x = np.array(texts, dtype=object)
    expected = _reference_run(8, code, x)
    got = castlike.cast(x, target, profile="reference")
    t = TYPES[castlike.onnx_type(target)]
    _same_bits(got, _bits(expected, t), t)


# -- the oracle itself ----------------------------------------------------------------------------


def test_oracle_grammar() -> None:
    assert oracle.parse(" \t-1.5e3\n") == oracle.parse("-1500")
    assert oracle.parse("INFINITY") is not None and oracle.parse("-NaN") is not None
    assert oracle.parse("1e400") is not None and oracle.parse("1e400").is_inf  # type: ignore[union-attr]
    for text in INVALID:
        assert oracle.parse(text) is None, text
    assert oracle.parse(b"2.5") == oracle.parse("2.5")
    assert oracle.parse(b"\xff") is None


def test_oracle_shortest_is_nearest_and_shortest() -> None:
    """For a sample of FLOAT16 patterns: no shorter decimal reads back, and among decimals of
    its length the text is the nearest one, the even one of two as near (brute force)."""
    t = spec_of(OnnxType.FLOAT16)
    for bits in range(0, 0x7C00, 37):
        d = oracle.shortest_decimal(bits, t)
        if d.digits == 0:
            continue
        value = decode(bits, t).magnitude
        n = len(d.text)
        unit = Fraction(10) ** (d.exponent)
        for candidate in (d.digits - 1, d.digits + 1):
            other = oracle.string_to_bits(f"{candidate}e{d.exponent}", t, SPEC)
            if other == bits:  # nearer, or as near and even (0.46875 -> 0.4688)
                ours, theirs = abs(d.digits * unit - value), abs(candidate * unit - value)
                assert ours < theirs or (ours == theirs and d.digits % 2 == 0)
        if n > 1:
            coarser = unit * 10
            for c in (math.floor(value / coarser), math.ceil(value / coarser)):
                assert oracle.string_to_bits(f"{c}e{d.exponent + 1}", t, SPEC) != bits
