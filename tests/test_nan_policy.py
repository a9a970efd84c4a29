"""R3's one NaN policy, and the pure engine and the native kernels giving the same bits.

Between FLOAT16, BFLOAT16, FLOAT and DOUBLE a NaN keeps its sign and the top bits of its
payload, quieted (what the hardware conversions do); into its own type a pattern is kept as
it is; from the 8-bit floats a NaN is the target's quiet NaN with the input's sign bit.  The
spec writes it once (:func:`castlike.spec.rules.ieee_nan_field`); the oracle, the tables, the
engine and the kernels follow it.  ``CASTLIKE_NATIVE=0`` (the pure engine) and the kernels give
identical bits, NaN payloads included, on every pattern of the 8/16-bit sources and on the NaN
patterns of FLOAT and DOUBLE, into every target, in every distinct mode.
"""

from __future__ import annotations

import numpy as np
import pytest

from castlike import _native
from castlike.backends.numpy import ADAPTER as NUMPY
from castlike.spec.opsets import Op
from castlike.spec.plan import resolve
from castlike.spec.reference import cast_bits
from castlike.spec.rules import IEEE_NAN_TYPES, Mode, canonical_mode
from castlike.spec.types import OnnxType, TypeSpec, spec_of
from castlike.testing import all_modes, exhaustive_inputs, numeric_types

pytestmark = pytest.mark.numpy_session

_T = OnnxType
TARGETS = numeric_types()
SMALL = [t for t in TARGETS if t.bits <= 16]

#: NaN patterns of FLOAT and DOUBLE: quiet and signalling, payloads at the top, at the bottom
#: and everywhere, both signs.
_NAN_BITS = {
    _T.FLOAT: [0x7F800001, 0x7FC00000, 0x7FBFFFFF, 0x7FC00001, 0x7FFFFFFF, 0x7F802000,
               0xFF800001, 0xFFC00000, 0xFFFFFFFF, 0xFFA00000, 0x7FA5A5A5],
    _T.DOUBLE: [0x7FF0000000000001, 0x7FF8000000000000, 0x7FF7FFFFFFFFFFFF,
                0x7FF8000000000001, 0x7FFFFFFFFFFFFFFF, 0x7FF0000020000000,
                0xFFF0000000000001, 0xFFF8000000000000, 0xFFFFFFFFFFFFFFFF,
                0x7FF4000000000000, 0x7FFA5A5A5A5A5A5A],
}  # fmt: skip


def _inputs(source: TypeSpec) -> np.ndarray:
    if source.bits <= 16:
        return exhaustive_inputs(source)
    storage = np.dtype(f"uint{source.storage_bits}")
    return NUMPY.from_bits(np.array(_NAN_BITS[_T(source.code)], dtype=storage), source)


def _modes(source: TypeSpec, target: TypeSpec) -> list[Mode]:
    return list(dict.fromkeys(canonical_mode(m, source, target) for m in all_modes()))


@pytest.mark.parametrize("source", [*SMALL, spec_of(_T.FLOAT), spec_of(_T.DOUBLE)], ids=str)
def test_pure_engine_equals_the_kernels(source: TypeSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    if _native.module() is None:
        pytest.skip("the native kernels are not built")
    x = _inputs(source)
    engine = NUMPY.engine()
    differ = []
    for target in TARGETS:
        for mode in _modes(source, target):
            plan = resolve(Op.CAST, source, target, profile=mode.profile, saturate=mode.saturate,
                           round_mode=mode.round_mode)  # fmt: skip
            kernels = NUMPY.bits(engine.cast(x, plan), target)
            pure = NUMPY.bits(engine.cast_pure(x, plan), target)
            bad = np.flatnonzero(kernels != pure)
            if bad.size:
                i = bad[0]
                b = int(NUMPY.bits(x, source).reshape(-1)[i])
                k, p = int(kernels.reshape(-1)[i]), int(pure.reshape(-1)[i])
                differ.append(
                    f"{target.name} {mode.profile.value}: {bad.size} differ, e.g. 0x{b:X} -> "
                    f"kernels 0x{k:X}, pure 0x{p:X}"
                )
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize(
    ("source", "target", "bits", "expected"),
    [
        ("FLOAT16", "FLOAT", 0x7C01, 0x7FC02000),  # signalling: quieted, payload kept at the top
        ("FLOAT16", "DOUBLE", 0xFC01, 0xFFF8040000000000),
        ("BFLOAT16", "FLOAT", 0x7F81, 0x7FC10000),
        ("FLOAT", "FLOAT16", 0x7F800001, 0x7E00),  # a payload only below FLOAT16's mantissa
        ("FLOAT", "FLOAT16", 0x7FBFFFFF, 0x7FFF),
        ("FLOAT", "BFLOAT16", 0xFFBFFFFF, 0xFFFF),
        ("DOUBLE", "FLOAT", 0x7FF0000020000000, 0x7FC00001),
        ("FLOAT16", "FLOAT16", 0x7C01, 0x7C01),  # into its own type: the pattern itself
        ("FLOAT8E5M2", "FLOAT", 0x7D, 0x7FC00000),  # from 8 bits: the quiet NaN, sign kept
        ("FLOAT8E4M3FNUZ", "FLOAT16", 0x80, 0xFE00),
    ],
)
def test_the_policy(source: str, target: str, bits: int, expected: int) -> None:
    s, t = spec_of(source), spec_of(target)
    assert cast_bits(bits, s, t, Mode()) == expected
    x = NUMPY.from_bits(np.array([bits], dtype=f"uint{s.storage_bits}"), s)
    engine = NUMPY.engine()
    plan = resolve(Op.CAST, s, t)
    assert int(NUMPY.bits(engine.cast(x, plan), t)[0]) == expected
    assert int(NUMPY.bits(engine.cast_pure(x, plan), t)[0]) == expected


def test_the_policy_covers_the_ieee_types() -> None:
    assert {spec_of(t).name for t in IEEE_NAN_TYPES} == {"FLOAT16", "BFLOAT16", "FLOAT", "DOUBLE"}
