"""The public API on NumPy: what goes in, what comes out, and the errors of R11."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import castlike
from castlike import (
    BackendTypeError,
    CastError,
    DisallowedCastError,
    OnnxType,
    OpsetError,
    UnknownTypeError,
    UnsupportedTypeError,
)


def u8(x) -> list[int]:
    return [int(b) for b in np.asarray(x).view(np.uint8).reshape(-1)]


# -- worked examples ---------------------------------------------------------------------------


def test_done_when_float8_examples() -> None:
    x = np.array([0.1, 448, 500, 1e6, np.nan, np.inf, -0.0])
    assert u8(castlike.cast(x, "FLOAT8E4M3FN")) == [0x1D, 0x7E, 0x7E, 0x7E, 0x7F, 0x7E, 0x80]
    assert u8(castlike.cast(x, "FLOAT8E4M3FN", saturate=False)) == [
        0x1D,
        0x7E,
        0x7F,
        0x7F,
        0x7F,
        0x7F,
        0x80,
    ]


def test_done_when_single_rounding_from_double() -> None:
    x = np.float64(1 + 2**-4 + 2**-40)
    spec = castlike.cast(x, "FLOAT8E4M3FN")
    # onnx.reference rounds DOUBLE through FLOAT with ml_dtypes before 0.7, once with 0.7.
    before = castlike.cast(x, "FLOAT8E4M3FN", profile="reference:ml_dtypes-0.6")
    since = castlike.cast(x, "FLOAT8E4M3FN", profile="reference:ml_dtypes-0.7")
    assert isinstance(spec, np.generic) and spec.dtype == ml_dtypes.float8_e4m3fn
    assert float(spec) == 1.125 and float(before) == 1.0 and float(since) == 1.125


# -- inputs and outputs -------------------------------------------------------------------------


def test_scalars_and_lists() -> None:
    assert isinstance(castlike.cast(np.float32(2.5), "INT4"), np.generic)
    zero_d = castlike.cast(2.5, "INT4")  # Python scalars are taken as NumPy arrays (R10)
    assert isinstance(zero_d, np.ndarray) and zero_d.shape == () and int(zero_d) == 2
    from_list = castlike.cast([1.5, 2.5, -0.5], "INT8")
    assert from_list.dtype == np.int8 and from_list.tolist() == [1, 2, 0]


@pytest.mark.parametrize("target", ["FLOAT16", "BFLOAT16", "FLOAT8E5M2", "INT4", "UINT64", "BOOL"])
def test_shape_dtype_and_input_untouched(target: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)[:, ::2, 1:]  # non-contiguous
    before = x.copy()
    y = castlike.cast(x, target)
    assert y.shape == x.shape
    assert y.dtype == castlike.backends.adapter_named("numpy").library_dtype(
        castlike.spec.spec_of(target)
    )
    np.testing.assert_array_equal(x.view(np.uint32), before.view(np.uint32))
    assert not np.shares_memory(x, y)


def test_byte_swapped_input() -> None:
    x = np.array([1.5, -2.25, 448.0], dtype=">f4")
    y = castlike.cast(x, "FLOAT8E4M3FN")
    np.testing.assert_array_equal(y.astype(np.float32), [1.5, -2.25, 448.0])


def test_identity_casts_copy() -> None:
    x = np.array([1.0, np.nan], np.float32)
    y = castlike.cast(x, "FLOAT")
    assert y is not x and not np.shares_memory(x, y)


def test_cast_like_accepts_arrays_dtypes_names_codes() -> None:
    x = np.array([1.0, 2.5, 3.5])
    expected = [1, 2, 4]
    assert castlike.cast_like(x, np.zeros(2, ml_dtypes.int4)).tolist() == expected
    assert castlike.cast_like(x, ml_dtypes.int4).tolist() == expected
    assert castlike.cast_like(x, "int4").tolist() == expected
    assert castlike.cast_like(x, 22).tolist() == expected
    assert castlike.cast_like(x, OnnxType.INT4).tolist() == expected
    assert castlike.cast(x, np.dtype(ml_dtypes.int4)).tolist() == expected


def test_cast_like_validates_its_own_versions() -> None:
    x = np.ones(2, np.float32)
    assert castlike.cast_like(x, np.zeros(1, np.float16), opset=15).dtype == np.float16
    with pytest.raises(OpsetError, match="CastLike does not exist in opset 13"):
        castlike.cast_like(x, np.zeros(1, np.float16), opset=13)
    # opset=None: the latest Cast, which has FLOAT6 (CastLike-25 does not).
    assert castlike.cast_like(x, "FLOAT6E2M3").dtype == ml_dtypes.float6_e2m3fn
    with pytest.raises(DisallowedCastError, match="CastLike-25"):
        castlike.cast_like(x, "FLOAT6E2M3", opset=28)


def test_onnx_type_and_can_cast() -> None:
    assert castlike.onnx_type(np.float32) is OnnxType.FLOAT
    assert castlike.onnx_type(np.zeros(2, ml_dtypes.float8_e8m0fnu)) is OnnxType.FLOAT8E8M0
    assert castlike.onnx_type(np.array(["a"])) is OnnxType.STRING
    assert castlike.onnx_type("bfloat16") is OnnxType.BFLOAT16
    assert castlike.can_cast("FLOAT", "BFLOAT16", opset=13)
    assert not castlike.can_cast("FLOAT", "BFLOAT16", opset=12)
    assert not castlike.can_cast("FLOAT", "FLOAT8E4M3FN", op="CastLike", opset=18)
    assert castlike.can_cast("FLOAT", "FLOAT8E4M3FN", op="CastLike", opset=19)
    assert not castlike.can_cast("FLOAT", "INT4", op="CastLike", opset=14)


def test_opset_semantics_fnuz_inf() -> None:
    x = np.array([np.inf, -np.inf], np.float32)
    assert u8(castlike.cast(x, "FLOAT8E4M3FNUZ", opset=23)) == [0x80, 0x80]
    assert u8(castlike.cast(x, "FLOAT8E4M3FNUZ", opset=24)) == [0x7F, 0xFF]
    assert u8(castlike.cast(x, "FLOAT8E5M2FNUZ", opset=19, profile="reference")) == [0x7F, 0xFF]


# -- errors (R11) ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("to", "error", "text"),
    [
        ("FLOAT9", UnknownTypeError, "unknown ONNX type name 'FLOAT9'; did you mean"),
        ("complex64", UnsupportedTypeError, "casting from/to complex is not supported"),
        (14, UnsupportedTypeError, "casting from/to complex is not supported"),
        (0, UnsupportedTypeError, "UNDEFINED"),
        (99, UnknownTypeError, "99 is not an ONNX TensorProto type code"),
        (True, UnknownTypeError, "is not a type"),
        (np.complex128, UnsupportedTypeError, "complex"),
        (object(), UnknownTypeError, "is not an ONNX type"),
    ],
)
def test_bad_target_types(to, error, text) -> None:
    with pytest.raises(error, match=text) as info:
        castlike.cast(np.ones(2), to)
    assert isinstance(info.value, CastError) and isinstance(info.value, TypeError)


def test_complex_source() -> None:
    with pytest.raises(UnsupportedTypeError, match="complex"):
        castlike.cast(np.ones(2, np.complex64), "FLOAT")


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"opset": 13, "saturate": False}, r"Cast-13 \(opset 13\) has no 'saturate' attribute"),
        ({"opset": 23, "round_mode": "down"}, r"Cast-23 \(opset 23\) has no 'round_mode'"),
        ({"opset": 0}, "outside the opsets castlike knows"),
        ({"opset": 99}, "outside the opsets castlike knows"),
        ({"opset": "19"}, "opset must be an int"),
        ({"profile": "onnxruntime"}, "unknown profile 'onnxruntime'"),
        ({"round_mode": "even"}, "unknown round_mode 'even'"),
        ({"saturate": 1}, "saturate must be True or False"),
        ({"errors": "ignore"}, "errors must be 'raise' or 'coerce'"),
    ],
)
def test_bad_options(kwargs, text) -> None:
    with pytest.raises(castlike.CastValueError, match=text) as info:
        castlike.cast(np.ones(2, np.float32), "FLOAT16", **kwargs)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("source", "target", "opset", "text"),
    [
        (
            np.float32,
            "FLOAT8E4M3FN",
            18,
            "Cast-13 \\(opset 18\\) does not allow FLOAT8E4M3FN as "
            "target type \\(casting FLOAT -> FLOAT8E4M3FN\\); Cast allows it from opset 19",
        ),
        (np.float32, "BFLOAT16", 12, "Cast-9 .* does not allow BFLOAT16"),
        (ml_dtypes.int4, "FLOAT", 20, "Cast-19 .* does not allow INT4 as source type"),
        (np.float32, "FLOAT8E8M0", 23, "allows it from opset 24"),
        (np.float32, "INT2", 24, "allows it from opset 25"),
        (np.float32, "FLOAT6E3M2", 25, "allows it from opset 28"),
    ],
)
def test_pairs_disallowed_by_version(source, target, opset, text) -> None:
    with pytest.raises(DisallowedCastError, match=text):
        castlike.cast(np.zeros(2, source), target, opset=opset)


def test_every_error_is_a_cast_error() -> None:
    for cls in (
        BackendTypeError,
        DisallowedCastError,
        OpsetError,
        UnknownTypeError,
        UnsupportedTypeError,
        castlike.InvalidStringError,
    ):
        assert issubclass(cls, CastError)
        assert issubclass(cls, TypeError) or issubclass(cls, ValueError)


def test_cached_plans_do_not_hide_bad_options() -> None:
    # Plans are cached by their options; 1 == True and 19.0 == 19 must not hit the cache.
    x = np.ones(2, np.float32)
    castlike.cast(x, "FLOAT8E4M3FN", saturate=True, opset=19)
    with pytest.raises(castlike.CastValueError, match="saturate must be True or False"):
        castlike.cast(x, "FLOAT8E4M3FN", saturate=1, opset=19)
    with pytest.raises(castlike.CastValueError, match="opset must be an int"):
        castlike.cast(x, "FLOAT8E4M3FN", saturate=True, opset=19.0)
    with pytest.raises(castlike.CastValueError, match="opset must be an int"):
        castlike.cast(x, "FLOAT8E4M3FN", opset=[19])
