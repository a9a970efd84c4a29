"""The lookup tables (castlike.spec.tables) and the integer rules they are built from
(castlike.spec.binary), against the Fraction oracle (castlike.spec.reference)."""

from __future__ import annotations

import ast
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from castlike.spec import binary, tables
from castlike.spec.reference import cast_bits
from castlike.spec.rules import Mode, Profile, RoundMode, canonical_mode
from castlike.spec.types import TYPES, FloatFormat, Kind, OnnxType, Special, TypeSpec, spec_of
from castlike.testing import (
    OracleJob,
    curated_inputs,
    exhaustive_inputs,
    oracle_bits,
    precompute,
    random_inputs,
)

pytestmark = pytest.mark.numpy_session

T = spec_of
NUMERIC = [t for t in TYPES.values() if t.is_numeric]
SOURCES = [t for t in NUMERIC if t.bits <= 16]
SMALL_FLOATS = [t for t in NUMERIC if t.is_float and t.storage_bits == 8]


def _modes() -> list[Mode]:
    """Every option combination, the opset 19-23 FNUZ rule included."""
    return [
        Mode(saturate, round_mode, profile, fnuz)
        for profile in Profile
        for saturate in (True, False)
        for round_mode in RoundMode
        for fnuz in (False, True)
    ]


def _distinct_modes(source: TypeSpec, target: TypeSpec) -> list[Mode]:
    return sorted({canonical_mode(m, source, target) for m in _modes()}, key=repr)


def _sample(t: TypeSpec, n: int = 768) -> np.ndarray:
    """Every pattern of a type of 8 bits or fewer; for 16 bits, both ends of each sign's
    range (zero, subnormals, max, Inf, NaN) and a fixed random sample."""
    if t.bits <= 8:
        return np.arange(1 << t.bits, dtype=np.int64)
    half = 1 << (t.bits - 1)
    ends = np.r_[0:128, half - 1200 : half + 128, (1 << t.bits) - 1200 : 1 << t.bits]
    rng = np.random.default_rng(15)
    return np.unique(np.r_[ends, rng.integers(0, 1 << t.bits, n)]).astype(np.int64)


def _oracle(patterns: np.ndarray, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    return np.array([cast_bits(int(p), source, target, mode) for p in patterns], dtype=np.uint64)


def _first_difference(patterns, got, want, source, target, mode) -> str:
    i = int(np.flatnonzero(got != want)[0])
    return (
        f"{source.name} 0x{int(patterns[i]):X} -> {target.name} under {mode}: "
        f"0x{int(got[i]):X}, oracle 0x{int(want[i]):X}"
    )


# -- the integer rules against the Fraction oracle --------------------------------------------


@pytest.mark.parametrize("target", NUMERIC, ids=lambda t: t.name)
@pytest.mark.parametrize("source", SOURCES, ids=lambda t: t.name)
def test_integer_rules_equal_the_oracle(source: TypeSpec, target: TypeSpec) -> None:
    patterns = _sample(source)
    for mode in _distinct_modes(source, target):
        got = binary.cast_patterns(patterns, source, target, mode)
        want = _oracle(patterns, source, target, mode)
        assert np.array_equal(got, want), _first_difference(
            patterns, got, want, source, target, mode
        )


@pytest.mark.parametrize("target", NUMERIC, ids=lambda t: t.name)
def test_integer_rules_equal_the_oracle_from_float(target: TypeSpec) -> None:
    """FLOAT sources (the class tables' representatives): every exponent, both signs, the
    mantissa's ends and random middles, and the special patterns."""
    rng = np.random.default_rng(32)
    top = np.arange(512, dtype=np.int64) << 23  # sign and exponent
    low = np.array([0, 1, 2, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFF], dtype=np.int64)
    patterns = np.unique(
        np.r_[(top[:, None] | low).ravel(), rng.integers(0, 1 << 32, 3000, dtype=np.int64)]
    )
    source = T("FLOAT")
    for mode in _distinct_modes(source, target):
        got = binary.cast_patterns(patterns, source, target, mode)
        want = _oracle(patterns, source, target, mode)
        assert np.array_equal(got, want), _first_difference(
            patterns, got, want, source, target, mode
        )


def test_decode_equals_the_oracle() -> None:
    from castlike.spec.reference import decode

    for t in SOURCES:
        patterns = _sample(t)
        values = binary.decode_patterns(patterns, t)
        for i, p in enumerate(patterns):
            exact = decode(int(p), t)
            assert values.nan[i] == exact.is_nan and values.inf[i] == exact.is_inf, (t, p)
            if exact.kind == "finite":
                scale = Fraction(2) ** int(values.exponent[i])
                value = int(values.significand[i]) * scale
                assert value == exact.magnitude and values.negative[i] == exact.negative, (t, p)


def test_every_numeric_source_is_decoded_and_strings_are_refused() -> None:
    assert all(binary.supports_source(t) for t in NUMERIC)
    assert not binary.supports_source(T("STRING"))
    with pytest.raises(ValueError, match="STRING"):
        binary.decode_patterns(np.zeros(1, np.int64), T("STRING"))
    wider = TypeSpec("FLOAT80ISH", 1002, Kind.FLOAT, 80, FloatFormat(15, 63, 16383, Special.IEEE))
    assert not binary.supports_source(wider)  # significands beyond 53 bits


@pytest.mark.parametrize("target", NUMERIC, ids=lambda t: t.name)
@pytest.mark.parametrize("source", [t for t in NUMERIC if t.bits > 16], ids=lambda t: t.name)
def test_integer_rules_equal_the_oracle_on_wide_sources(source: TypeSpec, target: TypeSpec) -> None:
    """FLOAT, DOUBLE and the 32/64-bit integers: a sample of the curated inputs (ties, +-max,
    2**24/2**53/2**63/2**64 neighbours, subnormals, NaN payloads) and random patterns."""
    from castlike.backends.numpy import ADAPTER

    curated = curated_inputs(source)
    picked = np.unique(np.r_[0 : curated.size : 7, curated.size - 40 : curated.size])
    inputs = np.concatenate([curated[picked], random_inputs(source, 200, 11)])
    patterns = ADAPTER.bits(inputs, source)
    for mode in _distinct_modes(source, target):
        got = binary.cast_patterns(patterns, source, target, mode)
        want = _oracle(patterns, source, target, mode)
        assert np.array_equal(got, want), _first_difference(
            patterns, got, want, source, target, mode
        )


# -- the tables --------------------------------------------------------------------------------


@pytest.mark.parametrize("target", NUMERIC, ids=lambda t: t.name)
@pytest.mark.parametrize("source", SOURCES, ids=lambda t: t.name)
def test_pattern_table_is_the_rule(source: TypeSpec, target: TypeSpec) -> None:
    """Every entry is the rule's result (the oracle's, by the tests above), except where R3
    leaves a NaN payload open: there it is a NaN of the input's sign."""
    for mode in _distinct_modes(source, target):
        table = tables.pattern_table(source, target, mode)
        assert table.dtype == np.dtype(f"uint{target.storage_bits}")
        assert table.shape == (1 << source.bits,) and not table.flags.writeable
        patterns = np.arange(1 << source.bits, dtype=np.int64)
        rule = binary.cast_patterns(patterns, source, target, mode)
        differ = np.flatnonzero(table != rule)
        if differ.size:
            assert source.code in (OnnxType.FLOAT16, OnnxType.BFLOAT16), (source, target, mode)
            inputs = binary.decode_patterns(patterns[differ], source)
            assert inputs.nan.all()
            fmt = target.fmt
            out = table[differ].astype(np.uint64)
            exponent = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits
            mantissa = out & np.uint64((1 << fmt.mantissa_bits) - 1)
            assert ((out & np.uint64(exponent)) == exponent).all() and mantissa.all()
            assert np.array_equal((out & fmt.sign_mask) != 0, inputs.negative)


def test_pattern_table_follows_the_nan_policy() -> None:
    """R3's one NaN policy: quieted, sign and payload top bits kept; into its own type the
    pattern itself."""
    f16, bf16 = T("FLOAT16"), T("BFLOAT16")
    assert tables.pattern_table(f16, T("FLOAT"), Mode())[0x7C01] == 0x7FC02000
    assert tables.pattern_table(f16, T("DOUBLE"), Mode())[0xFC01] == 0xFFF8040000000000
    assert tables.pattern_table(bf16, T("FLOAT16"), Mode())[0x7F81] == 0x7E08
    assert tables.pattern_table(bf16, bf16, Mode())[0x7F81] == 0x7F81
    assert tables.pattern_table(bf16, bf16, Mode(profile=Profile.LEGACY))[0x7F81] == 0x7F81
    assert tables.pattern_table(f16, bf16, Mode())[0xFE01] == 0xFFC0  # payload below BF16's


@pytest.mark.parametrize("target", SMALL_FLOATS, ids=lambda t: t.name)
def test_float_class_table_equals_the_oracle(target: TypeSpec) -> None:
    """Every class's entry, in the spec profile's every mode; sampled in the others."""
    source = T("FLOAT")
    index = np.arange(1 << (32 - tables.FLOAT32_CLASS_BITS + 1), dtype=np.int64)
    representatives = ((index >> 1) << tables.FLOAT32_CLASS_BITS) | (index & 1)
    rng = np.random.default_rng(8)
    for mode in _distinct_modes(source, target):
        table = tables.float32_class_table(target, mode)
        assert table.dtype == np.uint8 and not table.flags.writeable
        chosen = index if mode.profile is Profile.SPEC else rng.choice(index, 2048)
        want = _oracle(representatives[chosen], source, target, mode)
        got = table[chosen].astype(np.uint64)
        assert np.array_equal(got, want), _first_difference(
            representatives[chosen], got, want, source, target, mode
        )


def _double_samples() -> np.ndarray:
    """DOUBLE patterns: every exponent near FLOAT's and the small floats' ranges with the
    mantissa's ends, subnormals, huge values, specials, and random patterns."""
    rng = np.random.default_rng(64)
    exponents = np.r_[0:8, 860:900, 1023 - 160 : 1023 + 140, 2040:2048].astype(np.uint64)
    mantissas = np.array(
        [0, 1, 1 << 47, (1 << 48) - 1, 1 << 48, 3 << 50, 1 << 51, (1 << 52) - 1], dtype=np.uint64
    )
    grid = (exponents[:, None] << np.uint64(52)) | mantissas
    positive = np.r_[grid.ravel(), rng.integers(0, 1 << 63, 2000, dtype=np.uint64)]
    return np.unique(np.r_[positive, positive | np.uint64(1 << 63)])


@pytest.mark.parametrize("target", SMALL_FLOATS, ids=lambda t: t.name)
def test_double_class_table_equals_the_oracle(target: TypeSpec) -> None:
    """Through the class of each DOUBLE: the single correct rounding, where the profile rounds
    a DOUBLE once (the spec's; the others round through FLOAT first, without this table)."""
    source = T("DOUBLE")
    doubles = _double_samples()
    bits = doubles & np.uint64((1 << tables.DOUBLE_CLASS_BITS) - 1)
    index = ((doubles >> np.uint64(tables.DOUBLE_CLASS_BITS)) << np.uint64(1)) | (bits != 0)
    for mode in _distinct_modes(source, target):
        if mode.profile is not Profile.SPEC:
            continue
        table = tables.double_class_table(target, mode)
        assert table.dtype == np.uint8 and not table.flags.writeable
        got = table[index].astype(np.uint64)
        want = _oracle(doubles, source, target, mode)
        assert np.array_equal(got, want), _first_difference(
            doubles, got, want, source, target, mode
        )


def test_class_width_is_derived_from_the_spec() -> None:
    widest = max(t.fmt.mantissa_bits for t in SMALL_FLOATS)
    assert widest + 1 == tables.CLASS_MANTISSA_BITS
    assert tables.FLOAT32_CLASS_BITS == 23 - widest - 1 == 19
    assert tables.DOUBLE_CLASS_BITS == 52 - widest - 1 == 48
    index = tables.float32_class_index(np.array([0x3F800000, 0x3F800001, 0xFFFFFFFF], np.uint32))
    assert index.tolist() == [0xFE0, 0xFE1, 0x3FFF]


def test_no_table_for_wide_or_string_sources() -> None:
    with pytest.raises(ValueError, match="DOUBLE"):
        tables.pattern_table(T("DOUBLE"), T("FLOAT"), Mode())
    with pytest.raises(ValueError, match="FLOAT16"):
        tables.float32_class_table(T("FLOAT16"), Mode())


# -- a format outside the spec: exact, or refused ----------------------------------------------

#: A hypothetical 8-bit float with four mantissa bits, one more than any format of the spec: a
#: test-only extension of castlike.spec.types (it is not in TYPES).
FLOAT8E3M4 = TypeSpec("FLOAT8E3M4", 1001, Kind.FLOAT, 8, FloatFormat(3, 4, 3, Special.FN))


def test_a_wider_format_is_exact_from_every_float16_pattern() -> None:
    """Its pattern table is computed from its format, so it is exact on all FLOAT16 patterns
    (here against the oracle on every one of them)."""
    source = T("FLOAT16")
    patterns = np.arange(1 << 16, dtype=np.int64)
    for mode in (Mode(), Mode(saturate=False), *(Mode(profile=p) for p in Profile)):
        table = tables.pattern_table(source, FLOAT8E3M4, mode)
        want = _oracle(patterns, source, FLOAT8E3M4, mode)
        got = table.astype(np.uint64)
        assert np.array_equal(got, want), _first_difference(
            patterns, got, want, source, FLOAT8E3M4, mode
        )


def test_a_wider_format_has_no_class_table() -> None:
    """A FLOAT class keeps too few mantissa bits to round it: refused, never a wrong table."""
    for build in (tables.float32_class_table, tables.double_class_table):
        with pytest.raises(ValueError, match=r"FLOAT8E3M4 has 4 mantissa bits.*keeps only 4"):
            build(FLOAT8E3M4, Mode())
    narrower = replace(FLOAT8E3M4, name="FLOAT8E4M3LIKE", float_format=T("FLOAT8E4M3FN").fmt)
    # (saturate=False: the extension is not among the types the attribute applies to.)
    assert np.array_equal(
        tables.float32_class_table(narrower, Mode(saturate=False)),
        tables.float32_class_table(T("FLOAT8E4M3FN"), Mode(saturate=False)),
    )


# -- import cost -------------------------------------------------------------------------------


def test_the_spec_imports_no_array_library() -> None:
    """castlike.spec stays standard-library only at import: NumPy is imported by the table
    builders when they run (checked on the source, since importing castlike.spec imports the
    castlike package, whose API needs NumPy)."""
    import castlike.spec

    for path in sorted(Path(castlike.spec.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only; `if TYPE_CHECKING:` blocks are not run
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                assert name.partition(".")[0] in sys.stdlib_module_names | {"__future__"}, (
                    f"{path.name} imports {name} at module level"
                )


# -- the integer rules are the oracle's fast path: equal to the Fraction oracle everywhere ------


@pytest.fixture(scope="module")
def fraction_answers(oracle_cache: Path) -> Path:
    """The Fraction oracle's answers for every pattern of every source of 16 bits or fewer,
    computed once per cache (the tests of every backend compare with the integer rules)."""
    jobs = [
        OracleJob(s, t, m, "all", exact="fraction")
        for s in SOURCES
        for t in NUMERIC
        for m in _distinct_modes(s, t)
    ]
    precompute(jobs, oracle_cache)
    return oracle_cache


@pytest.mark.slow
@pytest.mark.parametrize("target", NUMERIC, ids=lambda t: t.name)
@pytest.mark.parametrize("source", SOURCES, ids=lambda t: t.name)
def test_integer_rules_equal_the_fraction_oracle_on_every_pattern(
    source: TypeSpec, target: TypeSpec, fraction_answers: Path
) -> None:
    inputs = exhaustive_inputs(source)
    patterns = np.arange(1 << source.bits, dtype=np.int64)
    for mode in _distinct_modes(source, target):
        want = oracle_bits(
            source,
            target,
            mode,
            inputs,
            cache_dir=fraction_answers,
            cache_key="all",
            exact="fraction",
        )
        got = binary.cast_patterns(patterns, source, target, mode)
        assert np.array_equal(got, want), _first_difference(
            patterns, got, want, source, target, mode
        )
        fast = oracle_bits(source, target, mode, inputs)  # what the backend tests compare with
        assert np.array_equal(fast, want)
