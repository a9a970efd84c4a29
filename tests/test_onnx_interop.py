"""castlike.onnx: TensorProto <-> arrays bit for bit (vs onnx.numpy_helper), and run_node."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="castlike.onnx needs onnx (pip install castlike[onnx])")

import ml_dtypes  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import castlike  # noqa: E402
from castlike.backends import adapter_named  # noqa: E402
from castlike.backends.numpy import ADAPTER as NUMPY  # noqa: E402
from castlike.errors import (  # noqa: E402
    BackendTypeError,
    CastTypeError,
    CastValueError,
    OpsetError,
    UnsupportedTypeError,
)
from castlike.onnx import as_declared, from_array, run_node, to_array  # noqa: E402
from castlike.spec.types import TYPES, OnnxType, TypeSpec  # noqa: E402
from castlike.testing import numeric_types, random_inputs  # noqa: E402

_T = OnnxType
NUMERIC = numeric_types()
SHAPES = [(), (0,), (1,), (2,), (3,), (4,), (5,), (8,), (9,), (2, 3), (7, 1), (3, 5, 2)]


def _name(t: TypeSpec) -> str:
    return t.name


def _patterns(t: TypeSpec, shape: tuple[int, ...]) -> np.ndarray:
    """Bit patterns of ``t`` filling ``shape``: every pattern in turn for narrow types."""
    n = int(np.prod(shape))
    if t.bits <= 16:
        bits = (np.arange(n, dtype=np.uint64) * 7919 + 3) % (1 << t.bits)
        storage = np.dtype(f"uint{t.storage_bits}")
        return NUMPY.from_bits(bits.astype(storage), t).reshape(shape)
    return random_inputs(t, n, seed=n).reshape(shape)


def _bits(a: np.ndarray, t: TypeSpec) -> np.ndarray:
    return NUMPY.bits(np.asarray(a), t)


def _onnx_knows(t: TypeSpec) -> None:
    """Skip a type the installed onnx predates (INT2/UINT2 came with onnx 1.20, FLOAT6* later):
    onnx's own helpers, which these tests compare with, cannot read or write it."""
    if not hasattr(TensorProto, t.name):
        pytest.skip(f"onnx {onnx.__version__} has no {t.name}")


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("t", NUMERIC, ids=_name)
def test_round_trip_matches_numpy_helper(t: TypeSpec, shape: tuple[int, ...]) -> None:
    _onnx_knows(t)
    a = _patterns(t, shape)
    tensor = from_array(a, name="x")
    assert tensor.data_type == t.code
    assert tensor.name == "x"
    assert list(tensor.dims) == list(shape)
    # The same wire bytes as onnx's own writer (packed 4/2/6-bit layouts included).
    assert tensor.raw_data == numpy_helper.from_array(a).raw_data
    back = to_array(tensor)
    assert back.dtype == a.dtype
    assert back.shape == a.shape
    np.testing.assert_array_equal(_bits(back, t), _bits(a, t))
    # onnx reads what castlike writes.
    np.testing.assert_array_equal(_bits(numpy_helper.to_array(tensor), t), _bits(a, t))


_TYPED_FIELD_VALUES = {
    _T.FLOAT: [0.5, -0.0, np.inf, 3.0e38],
    _T.DOUBLE: [0.1, -2.5, 1e300, -0.0],
    _T.INT64: [-(2**63), 2**63 - 1, 0, -1],
    _T.UINT64: [0, 2**64 - 1, 2**63, 1],
    _T.UINT32: [0, 2**32 - 1, 7, 2**31],
    _T.INT32: [-(2**31), 2**31 - 1, 0, -1],
    _T.INT16: [-32768, 32767, -1, 0],
    _T.UINT16: [0, 65535, 1, 32768],
    _T.INT8: [-128, 127, -1, 0],
    _T.UINT8: [0, 255, 1, 128],
    _T.BOOL: [True, False, True, True],
    _T.FLOAT16: [0.5, -65504.0, np.inf, -0.0],
    _T.BFLOAT16: [0.5, -3.0, 1e38, -0.0],
    _T.FLOAT8E4M3FN: [0.5, -448.0, 1.0, -0.0],
    _T.FLOAT8E4M3FNUZ: [0.5, -240.0, 1.0, 0.0],
    _T.FLOAT8E5M2: [0.5, -57344.0, np.inf, -0.0],
    _T.FLOAT8E5M2FNUZ: [0.5, -57344.0, 1.0, 0.0],
    _T.FLOAT8E8M0: [0.5, 2.0**127, 1.0, 2.0**-127],
    _T.INT4: [-8, 7, -1, 0, 3],
    _T.UINT4: [0, 15, 1, 8, 9],
    _T.FLOAT4E2M1: [0.5, -6.0, 1.5, -0.0, 3.0],
    _T.INT2: [-2, 1, -1, 0, 1],
    _T.UINT2: [0, 3, 1, 2, 3],
    _T.FLOAT6E2M3: [0.5, -7.5, 1.125, -0.0, 3.0],
    _T.FLOAT6E3M2: [0.5, -28.0, 1.25, -0.0, 3.0],
}


@pytest.mark.parametrize("code", list(_TYPED_FIELD_VALUES), ids=lambda c: c.name)
def test_typed_fields_read_like_numpy_helper(code: OnnxType) -> None:
    """Tensors written to float_data / int32_data / int64_data / ... (not raw_data)."""
    _onnx_knows(TYPES[code])
    values = _TYPED_FIELD_VALUES[code]
    tensor = helper.make_tensor("x", int(code), [len(values)], values, raw=False)
    assert not tensor.HasField("raw_data")
    t = TYPES[code]
    want = numpy_helper.to_array(tensor)
    got = to_array(tensor)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(_bits(got, t), _bits(want, t))


def test_packed_layouts_by_hand() -> None:
    # INT4: first element in the low nibble; an odd count pads the last byte with zero.
    t = from_array(np.array([1, -1, 3], ml_dtypes.int4))
    assert t.raw_data == bytes([0xF1, 0x03])
    # UINT2: four per byte, first element in bits 0-1.
    t = from_array(np.array([1, 2, 3, 0, 3], ml_dtypes.uint2))
    assert t.raw_data == bytes([0b00111001, 0b11])
    # FLOAT6: four elements in three bytes, a little-endian 6-bit stream, cut to ceil(6n/8).
    codes = np.array([0x3F, 0x01, 0x20, 0x15, 0x2A], np.uint8)
    t = from_array(codes.view(ml_dtypes.float6_e2m3fn))
    stream = sum(int(c) << (6 * i) for i, c in enumerate(codes))
    assert t.raw_data == stream.to_bytes(5, "little")[: -(-6 * 5 // 8)]
    np.testing.assert_array_equal(to_array(t).view(np.uint8), codes)


def test_big_endian_input_is_written_little_endian() -> None:
    a = np.array([1.5, -2.0], dtype=">f4")
    assert from_array(a).raw_data == np.array([1.5, -2.0], "<f4").tobytes()


def test_bool_reads_any_nonzero_byte_as_true() -> None:
    tensor = helper.make_tensor("b", TensorProto.BOOL, [3], b"\x00\x01\x02", raw=True)
    np.testing.assert_array_equal(to_array(tensor), [False, True, True])


@pytest.mark.parametrize(
    "array",
    [
        np.array(["a", "ßü€", ""], dtype=np.dtypes.StringDType()),
        np.array(["a", "ßü€", ""]),
        np.array(["a", "ßü€", ""], dtype=object),
        np.array([b"a", "ßü€".encode(), b""], dtype=object),
        np.array([b"a", "ßü€".encode(), b""]),
    ],
    ids=["StringDType", "U", "object-str", "object-bytes", "S"],
)
def test_strings_round_trip(array: np.ndarray) -> None:
    tensor = from_array(array.reshape(1, 3))
    assert tensor.data_type == TensorProto.STRING
    assert list(tensor.string_data) == [b"a", "ßü€".encode(), b""]
    back = to_array(tensor)
    assert back.dtype == np.dtypes.StringDType()
    assert back.shape == (1, 3)
    assert back.tolist() == [["a", "ßü€", ""]]
    assert numpy_helper.to_array(tensor).tolist() == [["a", "ßü€", ""]]


def test_string_tensor_of_other_objects_is_an_error() -> None:
    with pytest.raises(CastTypeError, match="str or bytes"):
        from_array(np.array(["a", 3], dtype=object))


def test_errors() -> None:
    complex_tensor = TensorProto(data_type=TensorProto.COMPLEX64, dims=[1], float_data=[1, 0])
    with pytest.raises(UnsupportedTypeError, match="complex"):
        to_array(complex_tensor)
    with pytest.raises(CastTypeError, match="UNDEFINED"):
        to_array(TensorProto())
    short = TensorProto(data_type=TensorProto.FLOAT, dims=[3], float_data=[1.0, 2.0])
    with pytest.raises(CastValueError, match="2 element"):
        to_array(short)
    external = helper.make_tensor("e", TensorProto.FLOAT, [1], [1.0])
    external.data_location = TensorProto.EXTERNAL
    external.external_data.add(key="location", value="weights.bin")
    with pytest.raises(CastValueError, match="external"):
        to_array(external)
    with pytest.raises(CastValueError, match="fewer than"):
        to_array(TensorProto(data_type=TensorProto.INT4, dims=[5], raw_data=b"\x11"))


@pytest.mark.parametrize("t", NUMERIC, ids=_name)
def test_to_array_on_each_backend(t: TypeSpec, backend: str) -> None:
    a = _patterns(t, (2, 3))
    tensor = from_array(a)
    adapter = adapter_named(backend)
    if adapter.library_dtype(t) is None:
        with pytest.raises(BackendTypeError, match=t.name):
            to_array(tensor, xp=backend)
        return
    x = to_array(tensor, xp=backend)
    assert x.dtype == adapter.library_dtype(t)
    np.testing.assert_array_equal(_bits(adapter.to_numpy(x), t), _bits(a, t))
    # and back: from_array takes the backend's array directly
    assert from_array(x).raw_data == tensor.raw_data


def test_strings_stay_numpy_whatever_xp() -> None:
    tensor = from_array(np.array(["1.5"]))
    assert isinstance(to_array(tensor, xp="numpy"), np.ndarray)


def test_as_declared_reinterprets_storage_only() -> None:
    bits = np.array([0x3F80, 0xC000], np.uint16)  # 1.0 and -2.0 as BFLOAT16 bits
    out = as_declared(bits, TensorProto.BFLOAT16)
    assert out.dtype == ml_dtypes.bfloat16
    assert out.tolist() == [1.0, -2.0]
    with pytest.raises(CastTypeError, match="declares FLOAT"):
        as_declared(bits, TensorProto.FLOAT)


# -- run_node ------------------------------------------------------------------------------------

_R4 = [0.1, 448.0, 500.0, 1e6, np.nan, np.inf, -0.0]


def _hex(a: np.ndarray) -> list[str]:
    return [f"0x{b:02X}" for b in np.asarray(a).view(np.uint8).reshape(-1)]


def test_cast_node_with_saturate() -> None:
    x = np.array(_R4, np.float32)
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN)
    (y,) = run_node(node, [x])
    assert _hex(y) == ["0x1D", "0x7E", "0x7E", "0x7E", "0x7F", "0x7E", "0x80"]
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN, saturate=0)
    (y,) = run_node(node, {"x": x})
    assert _hex(y) == ["0x1D", "0x7E", "0x7F", "0x7F", "0x7F", "0x7F", "0x80"]


def test_castlike_node() -> None:
    like = np.zeros(0, ml_dtypes.float8_e5m2fnuz)
    node = helper.make_node("CastLike", ["x", "like"], ["y"], saturate=0)
    (y,) = run_node(node, [np.array([np.inf, 1e9, 1.0], np.float32), like])
    assert y.dtype == ml_dtypes.float8_e5m2fnuz
    assert _hex(y) == ["0x80", "0x80", "0x40"]  # no saturate: Inf and overflow -> NaN


def test_round_mode_attribute() -> None:
    node = helper.make_node(
        "Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0, round_mode="down", saturate=1
    )
    (y,) = run_node(node, [np.array([3.0, 0.75], np.float32)])
    assert y.tolist() == [2.0, 0.5]
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0, round_mode="nearest")
    (y,) = run_node(node, [np.array([3.0, 0.74], np.float32)])
    assert y.tolist() == [4.0, 0.5]


def _model(node: object, opset: int, in_type: int, out_type: int, *names: str) -> object:
    inputs = [helper.make_tensor_value_info(n, in_type, [None]) for n in names]
    graph = helper.make_graph(
        [node], "g", inputs, [helper.make_tensor_value_info("y", out_type, [None])]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_model_takes_its_opset() -> None:
    """R2: Inf -> FLOAT8E4M3FNUZ with saturate is NaN in Cast-19..23, +-max from Cast-24."""
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FNUZ)
    x = np.array([np.inf, -np.inf], np.float32)
    old = _model(node, 23, TensorProto.FLOAT, TensorProto.FLOAT8E4M3FNUZ, "x")
    new = _model(node, 24, TensorProto.FLOAT, TensorProto.FLOAT8E4M3FNUZ, "x")
    assert _hex(run_node(old, [x])[0]) == ["0x80", "0x80"]
    assert _hex(run_node(new, [x])[0]) == ["0x7F", "0xFF"]
    # The reference profile has +-max at every version (R12).
    assert _hex(run_node(old, [x], profile="reference")[0]) == ["0x7F", "0xFF"]
    # An explicit opset must agree with the model's; a node alone takes any.
    with pytest.raises(CastValueError, match="imports opset 23"):
        run_node(old, [x], opset=24)
    assert _hex(run_node(node, [x], opset=23)[0]) == ["0x80", "0x80"]


def test_model_validates_against_its_opset() -> None:
    _onnx_knows(TYPES[_T.INT2])
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT2)
    model = _model(node, 24, TensorProto.FLOAT, TensorProto.INT2, "x")
    with pytest.raises(CastTypeError, match="INT2"):
        run_node(model, [np.ones(2, np.float32)])
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT, saturate=0)
    model = _model(node, 13, TensorProto.FLOAT16, TensorProto.FLOAT, "x")
    with pytest.raises(OpsetError, match="saturate"):
        run_node(model, [np.ones(2, np.float16)])


def test_model_reinterprets_declared_bfloat16() -> None:
    """ONNX <= 1.14 test data store BFLOAT16 tensors as UINT16; the graph says BFLOAT16."""
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)
    model = _model(node, 13, TensorProto.BFLOAT16, TensorProto.FLOAT, "x")
    stored = numpy_helper.from_array(np.array([0x3F80, 0xC040], np.uint16))
    (y,) = run_node(model, [stored])
    assert y.dtype == np.float32
    assert y.tolist() == [1.0, -3.0]


def test_model_with_two_nodes_and_an_initializer() -> None:
    first = helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16)
    second = helper.make_node("CastLike", ["h", "like"], ["y"])
    like = numpy_helper.from_array(np.zeros(1, ml_dtypes.int4), name="like")
    graph = helper.make_graph(
        [first, second],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [None])],
        [helper.make_tensor_value_info("y", TensorProto.INT4, [None])],
        initializer=[like],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    (y,) = run_node(model, [np.array([2.5, 9.0, -1.0])])
    assert y.dtype == ml_dtypes.int4
    assert y.tolist() == [2, -7, -1]  # R7: half to even, then the low 4 bits


def test_run_node_errors() -> None:
    x = np.ones(2, np.float32)
    with pytest.raises(CastTypeError, match="Relu"):
        run_node(helper.make_node("Relu", ["x"], ["y"]), [x])
    with pytest.raises(CastTypeError, match=r"com\.example::Cast"):
        run_node(helper.make_node("Cast", ["x"], ["y"], to=1, domain="com.example"), [x])
    with pytest.raises(CastValueError, match="no attribute 'axis'"):
        run_node(helper.make_node("Cast", ["x"], ["y"], to=1, axis=0), [x])
    with pytest.raises(CastValueError, match="'to'"):
        run_node(helper.make_node("Cast", ["x"], ["y"]), [x])
    with pytest.raises(CastValueError, match="two inputs"):
        run_node(helper.make_node("CastLike", ["x"], ["y"]), [x])
    with pytest.raises(CastTypeError, match="NodeProto"):
        run_node("Cast", [x])


@pytest.mark.parametrize("op", ["Cast", "CastLike"])
def test_run_node_on_each_backend(op: str, backend: str) -> None:
    adapter = adapter_named(backend)
    x = np.array(_R4, np.float32)
    like = np.zeros(0, ml_dtypes.float8_e4m3fn)
    if op == "Cast":
        node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN, saturate=0)
        inputs = [x]
    else:
        node = helper.make_node("CastLike", ["x", "like"], ["y"], saturate=0)
        inputs = [x, like]
    if adapter.library_dtype(TYPES[_T.FLOAT8E4M3FN]) is None:  # R10: refused, by name
        with pytest.raises(BackendTypeError, match=f"{backend} cannot hold FLOAT8E4M3FN"):
            run_node(node, inputs, backend=backend)
        # A type the library holds instead, equal to the NumPy backend's.
        node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT8)
        (y,) = run_node(node, [x], backend=backend)
        assert y.dtype == adapter.library_dtype(TYPES[_T.INT8])
        assert adapter.to_numpy(y).tolist() == castlike.cast(x, "INT8").tolist()
        return
    (y,) = run_node(node, inputs, backend=backend)
    assert y.dtype == adapter.library_dtype(TYPES[_T.FLOAT8E4M3FN])
    assert _hex(adapter.to_numpy(y)) == ["0x1D", "0x7E", "0x7F", "0x7F", "0x7F", "0x7F", "0x80"]
    # Inputs already in the backend need no backend argument.
    (z,) = run_node(node, [adapter.from_numpy(v) for v in inputs])
    assert type(z) is type(y)
    assert _hex(adapter.to_numpy(z)) == _hex(adapter.to_numpy(y))


def test_run_node_result_equals_cast() -> None:
    x = np.linspace(-20, 20, 97, dtype=np.float32)
    for t in NUMERIC:
        node = helper.make_node("Cast", ["x"], ["y"], to=t.code)
        (y,) = run_node(node, [x])
        want = castlike.cast(x, t.name)
        np.testing.assert_array_equal(_bits(y, t), _bits(want, t))


def test_docstring_examples() -> None:
    import doctest

    import castlike.onnx

    result = doctest.testmod(castlike.onnx, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
