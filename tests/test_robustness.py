"""Bad input never gives a wrong answer: every input a hostile caller tried, on every
installed backend, and the laws that keep it so.

* Silent wrong results that were: NumPy integer scalars taken as type codes, None taken as
  DOUBLE, ``can_cast`` and ``cast`` disagreeing on opsets, masked arrays losing their mask.
* Bare exceptions that escaped: strings that are not UTF-8 text, opsets of the wrong type,
  ragged lists, inputs that are no array, sparse and meta torch tensors.  Each is now a
  :class:`castlike.CastError` whose message names the problem.
* Bits: a FNUZ NaN into an IEEE target is the negative quiet NaN everywhere (R3), and the
  comparison helpers hold NaN bits exactly for sources of 8 bits or fewer.
* Resources: number -> STRING works in blocks.
* A hypothesis test throws random arguments at the four entry points and accepts only
  ``CastError`` s; the array-kind matrix checks odd layouts bitwise against contiguous copies.
"""

from __future__ import annotations

import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import castlike
import castlike.strings
from castlike import (
    BackendTypeError,
    CastError,
    InvalidInputError,
    InvalidStringError,
    OnnxType,
    OpsetError,
    UnknownTypeError,
)
from castlike.backends import adapter_named, moves_strings
from castlike.backends.numpy import ADAPTER as NUMPY
from castlike.spec.reference import cast_bits
from castlike.spec.rules import Mode
from castlike.spec.types import TYPES, spec_of
from castlike.testing import compare_bits, to_host

_T = OnnxType


def _on(backend: str, array: np.ndarray) -> Any:
    """A NumPy array as an array of ``backend``; skips where the library cannot hold it."""
    _require(backend, castlike.onnx_type(array))
    return adapter_named(backend).from_numpy(array)


def _refuses_strings(backend: str) -> bool:
    """Whether the backend refuses STRING (R10): the generic Array-API backend moves no data
    between its library and NumPy, where strings live (R9)."""
    return not moves_strings(adapter_named(backend))


def _require(backend: str, t: OnnxType) -> None:
    if adapter_named(backend).library_dtype(TYPES[t]) is None:
        pytest.skip(f"{backend} cannot hold {t.name} here (JAX: 64-bit types need x64)")


def _bits(x: Any) -> list[int]:
    host = to_host(x)
    return host.reshape(-1).view(f"uint{host.dtype.itemsize * 8}").tolist()


# == 1. NumPy integer scalars name their dtype, never a TensorProto code ========================


@pytest.mark.parametrize(
    ("scalar", "expected", "values"),
    [
        (np.int32(3), _T.INT32, [300, 1, -7]),  # not code 3 (INT8), which saturates 300 to 127
        (np.int64(5), _T.INT64, [300, 1, -7]),
        (np.uint8(1), _T.UINT8, [255, 1, 0]),  # R7 saturates; code 1 would be FLOAT
    ],
    ids=["int32(3)", "int64(5)", "uint8(1)"],
)
def test_numpy_integer_scalar_target_is_its_dtype(
    backend: str, scalar: Any, expected: OnnxType, values: list[int]
) -> None:
    x = _on(backend, np.array([300.0, 1.5, -7.0], np.float32))
    _require(backend, expected)
    result = to_host(castlike.cast(x, scalar))
    assert castlike.onnx_type(result) is expected
    assert result.tolist() == values
    if backend == "numpy":
        like = castlike.cast_like(x, scalar)
        assert like.dtype == scalar.dtype and like.tolist() == result.tolist()


def test_onnx_type_of_numpy_scalars() -> None:
    assert castlike.onnx_type(np.zeros(1, np.int32)[0]) is _T.INT32  # was "code 0 is UNDEFINED"
    assert castlike.onnx_type(np.int64(5)) is _T.INT64
    assert castlike.onnx_type(np.uint8(1)) is _T.UINT8
    # Codes are Python ints and OnnxType members.
    assert castlike.onnx_type(3) is _T.INT8
    assert castlike.onnx_type(OnnxType.FLOAT16) is _T.FLOAT16


# == 2. None names no type ======================================================================


def test_none_names_no_type(backend: str) -> None:
    x = _on(backend, np.array([1.5], np.float32))
    calls = [
        lambda: castlike.cast(x, None),
        lambda: castlike.cast_like(x, None),
        lambda: castlike.onnx_type(None),
        lambda: castlike.can_cast(None, "FLOAT"),
        lambda: castlike.can_cast("FLOAT", None),
    ]
    for call in calls:
        with pytest.raises(UnknownTypeError, match="None names no type"):
            call()


@pytest.mark.parametrize("cls", [dict, list, set, type, Exception])
def test_a_class_that_is_no_dtype_is_no_type(cls: type) -> None:
    # np.dtype(dict) is the object dtype, which would have meant STRING.
    with pytest.raises(UnknownTypeError, match="is not a dtype"):
        castlike.cast(np.ones(2), cls)


@pytest.mark.parametrize("name", [b"FLOAT", b"f4", bytearray(b"S")])
def test_type_names_are_str_not_bytes(name: Any) -> None:
    # np.dtype(b"f4") is float32 and np.dtype(b"a") the bytes dtype (STRING).
    with pytest.raises(UnknownTypeError, match="is bytes, not a type name"):
        castlike.onnx_type(name)


def test_a_scalar_type_as_like_of_strings() -> None:
    # Found by the random test: ml_dtypes.bfloat16 looked like an array of another library.
    result = castlike.cast_like(np.array(["1.5", "-2"]), ml_dtypes.bfloat16)
    assert result.dtype == ml_dtypes.bfloat16 and _bits(result) == [0x3FC0, 0xC000]


# == 3 and 6. can_cast and cast agree on what an opset is =======================================

_OPSETS = [None, 1, 13, 18, 19, 24, 28, 0, -1, 29, 99, 10**6, 19.0, np.int64(19), "19", [19]]
_OPSETS += [np.dtype("int32"), True, False, 19 + 0j]


@pytest.mark.parametrize("opset", _OPSETS, ids=repr)
@pytest.mark.parametrize("op", ["Cast", "CastLike"])
def test_can_cast_and_cast_agree_on_opsets(op: str, opset: Any) -> None:
    x = np.array([1.0, 500.0], np.float32)
    refusal = _refusal(lambda: castlike.can_cast("FLOAT", "FLOAT8E4M3FN", op=op, opset=opset))
    if refusal is not None:
        assert _refusal(lambda: _cast_op(op, x, "FLOAT8E4M3FN", opset)) == refusal
        return
    allowed = castlike.can_cast("FLOAT", "FLOAT8E4M3FN", op=op, opset=opset)
    if allowed:
        assert _bits(_cast_op(op, x, "FLOAT8E4M3FN", opset)) == [0x38, 0x7E]
    else:
        with pytest.raises(CastError):
            _cast_op(op, x, "FLOAT8E4M3FN", opset)


def _refusal(call: Any) -> str | None:
    """The message of the OpsetError ``call`` raises, or None."""
    try:
        call()
    except OpsetError as error:
        return str(error)
    return None


def _cast_op(op: str, x: Any, to: str, opset: Any) -> Any:
    if op == "Cast":
        return castlike.cast(x, to, opset=opset)
    return castlike.cast_like(x, to, opset=opset)


# == 4. Masked arrays keep their mask ==========================================================


@pytest.mark.parametrize("target", ["FLOAT16", "FLOAT8E4M3FN", "INT4", "STRING"])
def test_masked_array_gives_a_masked_array(target: str) -> None:
    data = np.array([1.5, 300.0, np.nan, -2.0], np.float32)
    mask = np.array([False, True, False, True])
    x = np.ma.MaskedArray(data, mask=mask)
    before = x.data.tobytes(), x.mask.tobytes()
    result = castlike.cast(x, target)
    assert isinstance(result, np.ma.MaskedArray)
    assert result.mask.tolist() == mask.tolist()
    plain = castlike.cast(data, target)
    assert result.data.dtype == plain.dtype
    if target == "STRING":
        assert result.data.tolist() == plain.tolist()
    else:
        assert _bits(result.data) == _bits(plain)  # the data under the mask is cast too
    assert (x.data.tobytes(), x.mask.tobytes()) == before


def test_masked_strings_are_not_read() -> None:
    x = np.ma.MaskedArray(np.array(["1.5", "not a number", "2"]), mask=[False, True, False])
    result = castlike.cast(x, "FLOAT")
    assert isinstance(result, np.ma.MaskedArray)
    assert result.mask.tolist() == [False, True, False]
    assert result.compressed().tolist() == [1.5, 2.0]
    assert x.data.tolist() == ["1.5", "not a number", "2"]


def test_masked_strings_like_an_array_of_another_library(backend: str) -> None:
    x = np.ma.MaskedArray(np.array(["1.5", "junk"]), mask=[False, True])
    like = _on(backend, np.zeros(1, np.float32))
    if backend == "numpy":
        assert castlike.cast_like(x, like).mask.tolist() == [False, True]
        return
    if _refuses_strings(backend):
        with pytest.raises(BackendTypeError, match=f"{backend} cannot hold STRING"):
            castlike.cast_like(x, like)
        return
    with pytest.raises(BackendTypeError, match="holds no mask"):
        castlike.cast_like(x, like)


# == 5. Strings that are not text ================================================================

_BAD_TEXT = {
    "invalid UTF-8 bytes (S)": np.array([b"1.5", b"\xff\xfe"]),
    "invalid UTF-8 bytes (object)": np.array([b"1.5", b"\xff\xfe"], dtype=object),
    "lone surrogate (object)": np.array(["1.5", "\ud800"], dtype=object),
    "lone surrogate (U)": np.array(["1.5", "\ud800"]),
    "mixed str and bad bytes": np.array(["1.5", b"\xc3"], dtype=object),
}


@pytest.mark.parametrize("strings", list(_BAD_TEXT.values()), ids=list(_BAD_TEXT))
@pytest.mark.parametrize("target", ["FLOAT", "FLOAT16", "FLOAT8E4M3FN", "DOUBLE"])
def test_bad_text_is_an_invalid_element(backend: str, strings: np.ndarray, target: str) -> None:
    like = _on(backend, np.zeros(1, castlike.cast(np.zeros(1), target).dtype))
    if _refuses_strings(backend):
        with pytest.raises(BackendTypeError, match=f"{backend} cannot hold STRING"):
            castlike.cast_like(strings, like)
        return
    with pytest.raises(InvalidStringError, match=r"at index \(1,\)"):
        castlike.cast_like(strings, like)
    result = to_host(castlike.cast_like(strings, like, errors="coerce"))
    nan = to_host(castlike.cast_like(np.array(["nan"]), like))
    one_and_a_half = to_host(castlike.cast_like(np.array(["1.5"]), like))
    assert _bits(result) == _bits(one_and_a_half) + _bits(nan)


@pytest.mark.parametrize("strings", list(_BAD_TEXT.values()), ids=list(_BAD_TEXT))
def test_bad_text_into_a_type_without_nan_names_its_index(strings: np.ndarray) -> None:
    for errors in ("raise", "coerce"):
        with pytest.raises(InvalidStringError, match=r"at index \(1,\)"):
            castlike.cast(strings, "INT8", errors=errors)


@pytest.mark.parametrize("dtype", [np.dtypes.StringDType(), "U", "S", object])
def test_text_after_nul_characters_is_not_padding(dtype: Any) -> None:
    # Found by the fuzzer: a long StringDType row whose byte past the reader's width was a
    # NUL looked like the short number before it ("-922337203").
    texts = ["-922337203" + "\x00" * 38 + "6855", "1" + "\x00" * 8 + "5", "7" + "\x00" * 40]
    strings = np.array([t.encode() if dtype == "S" else t for t in texts], dtype=dtype)
    with pytest.raises(InvalidStringError, match=r"at index \(0,\)"):
        castlike.cast(strings, "INT64")
    result = castlike.cast(strings, "FLOAT", errors="coerce")
    assert _bits(result) == [0x7FC00000, 0x7FC00000, 0x40E00000]  # trailing NULs are padding


_STRING_LIKES = {
    "StringDType": None,
    "U": np.array(["a"]),
    "S": np.array([b"a"]),
    "object str": np.array(["a"], dtype=object),
    "object bytes": np.array([b"a"], dtype=object),
}


@pytest.mark.parametrize("like", list(_STRING_LIKES.values()), ids=list(_STRING_LIKES))
@pytest.mark.parametrize("strings", list(_BAD_TEXT.values())[:3], ids=list(_BAD_TEXT)[:3])
def test_bad_text_to_utf8_strings_names_its_index(strings: np.ndarray, like: Any) -> None:
    # UTF-8 output kinds (and every kind, for bytes that are not UTF-8) cannot hold it.
    if like is None:
        like = np.array(["a"], dtype=np.dtypes.StringDType())
    holds_any_text = like.dtype.kind == "U" or (like.dtype.kind == "O" and isinstance(like[0], str))
    if holds_any_text and not any(isinstance(v, bytes) for v in strings.tolist()):
        result = castlike.cast_like(strings, like)  # U and str objects hold surrogates
        assert result.tolist() == strings.tolist()
        return
    with pytest.raises(InvalidStringError, match=r"at index \(1,\).*(UTF-8|surrogate)"):
        castlike.cast_like(strings, like)


# == 7 and 8. Inputs that are no array ===========================================================

_NOT_ARRAYS: dict[str, tuple[Any, str]] = {
    "None": (None, "x is a builtins.NoneType: None"),
    "dict": ({"a": 1}, "x is a builtins.dict"),
    "set": ({1, 2}, "x is a builtins.set"),
    "object": (object(), "x is a builtins.object"),
    "class np.float32": (np.float32, "x is the class numpy.float32, not an array"),
    "class dict": (dict, "x is the class builtins.dict"),
    "ragged list": ([[1, 2], [3]], "cannot be made an array.*inhomogeneous"),
    "list with None": ([1.0, None], r"holds a builtins.NoneType: None at index \(1,\)"),
    "2**70": (2**70, "the Python int 1180591620717411303424 is beyond INT64 and UINT64"),
    "-2**63 - 1": (-(2**63) - 1, "is beyond INT64 and UINT64"),
    "2**64": (2**64, "is beyond INT64 and UINT64.*pass it as a string"),
    "list with 2**70": ([1, 2**70], r"beyond INT64 and UINT64.*at index \(1,\)|at index"),
    "INT64 and UINT64 mixed": ([-1, 2**64 - 1], r"18446744073709551615 at index \(1,\).*DOUBLE"),
    "ints inexact in DOUBLE": ([0.5, 2**60 + 1], "DOUBLE does not hold it exactly"),
}


@pytest.mark.parametrize("case", list(_NOT_ARRAYS.values()), ids=list(_NOT_ARRAYS))
@pytest.mark.parametrize("target", ["FLOAT16", "STRING", "INT8"])
def test_inputs_that_are_no_array(case: tuple[Any, str], target: str) -> None:
    x, message = case
    with pytest.raises(InvalidInputError, match=message) as info:
        castlike.cast(x, target)
    assert any(s in str(info.value) for s in ("castlike casts arrays", "INT64", "DOUBLE"))
    assert isinstance(info.value, TypeError)
    with pytest.raises(InvalidInputError):
        castlike.cast_like(x, np.zeros(1, np.float16))


def test_python_ints_at_the_edges_are_exact() -> None:
    # R8 from the NumPy type Python ints get: INT64 and UINT64 hold these exactly.
    assert _bits(castlike.cast(2**64 - 1, "UINT64")) == [2**64 - 1]
    assert _bits(castlike.cast(-(2**63), "INT64")) == [2**63]
    assert _bits(castlike.cast(2**64 - 1, "FLOAT")) == [0x5F800000]  # 2**64, rounded once
    # Beyond them, the decimal text is read exactly (R9), as the error message advises.
    assert _bits(castlike.cast(str(2**70 + 1), "FLOAT")) == [0x62800000]


# == 9. Sparse and meta torch tensors ==========================================================


def _torch() -> Any:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    from conftest import BACKENDS

    if "torch" not in BACKENDS:
        pytest.skip("CASTLIKE_TEST_BACKENDS does not select torch")
    return torch


_TARGETS = ["INT4", "INT8", "BOOL", "STRING", "FLOAT16", "FLOAT8E4M3FN", "FLOAT8E8M0"]


@pytest.mark.parametrize("target", _TARGETS)
@pytest.mark.parametrize("saturate", [True, False])
def test_sparse_tensors_are_refused(target: str, saturate: bool) -> None:
    torch = _torch()
    x = torch.tensor([[0.0, 1.5], [2.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        layouts = (x.to_sparse(), x.to_sparse_csr())
    for sparse in layouts:
        with pytest.raises(BackendTypeError, match=r"strided.*to_dense") as info:
            castlike.cast(sparse, target, saturate=saturate)
        assert str(sparse.layout) in str(info.value)


@pytest.mark.parametrize("target", ["FLOAT16", "INT4", "STRING"])
def test_nested_tensors_are_refused(target: str) -> None:
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "nested tensors are a prototype"
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    with pytest.raises(BackendTypeError, match=r"nested.*unbind"):
        castlike.cast(nested, target)


def test_meta_tensors() -> None:
    torch = _torch()
    x = torch.zeros(3, 2, device="meta")
    with pytest.raises(BackendTypeError, match="meta tensor has no data"):
        castlike.cast(x, "STRING")
    for target in ("FLOAT16", "FLOAT8E4M3FN", "INT4", "BFLOAT16"):
        result = castlike.cast(x, target)  # shapes and dtypes only: no data is read
        assert result.device.type == "meta" and tuple(result.shape) == (3, 2)


# == 10. FNUZ NaN into IEEE targets: the table's bits on every backend ==========================


@pytest.mark.parametrize("source", ["FLOAT8E4M3FNUZ", "FLOAT8E5M2FNUZ"])
@pytest.mark.parametrize("target", ["FLOAT", "FLOAT16", "BFLOAT16", "DOUBLE"])
def test_fnuz_nan_is_the_negative_quiet_nan(backend: str, source: str, target: str) -> None:
    s, t = spec_of(_T[source]), spec_of(_T[target])
    _require(backend, _T[target])
    x = np.array([0x80, 0x00, 0x40], np.uint8).view(castlike.cast(np.zeros(1), source).dtype)
    result = castlike.cast(_on(backend, x), target)
    expected = [cast_bits(b, s, t, Mode()) for b in (0x80, 0x00, 0x40)]
    assert _bits(result) == expected
    assert expected[0] >> (t.bits - 1) == 1  # the sign bit is set (R3)


def test_comparison_holds_nan_bits_from_sources_of_8_bits_or_fewer() -> None:
    f8, f32, f64 = spec_of(_T.FLOAT8E4M3FNUZ), spec_of(_T.FLOAT), spec_of(_T.DOUBLE)
    positive_nan = np.array([0x7FC00000], np.uint32).view(np.float32)
    inputs8 = np.array([0x80], np.uint8).view(ml_dtypes.float8_e4m3fnuz)
    mismatch = compare_bits(positive_nan, np.array([0xFFC00000]), f8, f32, inputs8)
    assert mismatch is not None and mismatch.count == 1
    # From a wider source R3 leaves NaN payload and sign open: "is NaN" is enough.
    inputs64 = np.array([np.nan])
    assert compare_bits(positive_nan, np.array([0xFFC00000]), f64, f32, inputs64) is None


# == 13. Number -> STRING in blocks ===============================================================


@pytest.mark.parametrize("like", list(_STRING_LIKES.values()), ids=list(_STRING_LIKES))
def test_blocked_formatting_is_formatting_in_one_piece(
    like: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((7, 9)).astype(np.float32) * 10.0 ** rng.integers(-40, 39, (7, 9))
    x[0, :3] = [np.nan, np.inf, -0.0]
    views = {"contiguous": x, "strided": x[:, ::-2], "transposed": x.T}
    whole = {k: _cast_string(v, like) for k, v in views.items()}
    monkeypatch.setattr(castlike.strings, "FORMAT_BLOCK", 5)
    for name, view in views.items():
        blocked = _cast_string(view, like)
        assert blocked.dtype == whole[name].dtype and blocked.shape == view.shape
        assert blocked.tolist() == whole[name].tolist()


def _cast_string(x: np.ndarray, like: Any) -> np.ndarray:
    return castlike.cast(x, "STRING") if like is None else castlike.cast_like(x, like)


def test_string_output_temporaries_stay_within_64_mb() -> None:
    # 2**22 FLOAT: in one piece the text matrix alone was 84 MB (20 bytes an element).
    x = np.random.default_rng(0).standard_normal(1 << 22).astype(np.float32)
    castlike.cast(x[:10], "STRING")  # tables and templates are built outside the measure
    tracemalloc.start()
    try:
        result = castlike.cast(x, "STRING")
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.shape == x.shape
    assert peak - current < 64 * 2**20, f"{(peak - current) / 2**20:.1f} MB of temporaries"


# == The array-kind matrix ========================================================================

_SOURCES = ["FLOAT", "DOUBLE", "FLOAT16", "INT32", "FLOAT8E4M3FN"]
_KIND_TARGETS = ["FLOAT8E4M3FN", "FLOAT16", "BFLOAT16", "INT4", "FLOAT8E8M0", "UINT8", "STRING"]


def _base(source: str) -> np.ndarray:
    rng = np.random.default_rng(5)
    values = rng.standard_normal((6, 8)) * 10.0 ** rng.integers(-6, 6, (6, 8))
    values.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, -0.0, 448.0]
    dtype = castlike.cast(np.zeros(1), source).dtype
    if np.dtype(dtype).kind in "iu":
        return np.clip(np.nan_to_num(values), -1000, 1000).astype(dtype)
    return castlike.cast(values, source)


class _Tagged(np.ndarray):
    """An ndarray subclass of the caller's (it must be cast like its plain values)."""


def _numpy_kinds(x: np.ndarray, tmp_path: Path) -> dict[str, np.ndarray]:
    memmap = np.memmap(tmp_path / "x.bin", dtype=x.dtype, mode="w+", shape=x.shape)
    memmap[...] = x
    read_only = x.copy()
    read_only.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # np.matrix is discouraged
        matrix = np.asmatrix(x)
    kinds = {
        "0-d": x[2, 3],
        "0-d array": np.asarray(x[2, 3]).reshape(()),
        "empty": x[:0],
        "empty 2-d": x[:, :0],
        "non-contiguous": x[:, ::3],
        "negative strides": x[::-1, ::-2],
        "Fortran order": np.asfortranarray(x),
        "read-only": read_only,
        "memmap": memmap,
        "subclass": x.view(_Tagged),
        "matrix": matrix,
        "view of a reshape": x.reshape(4, 12)[1:3].T,
        "broadcast (stride 0)": np.broadcast_to(x[0], (3, 8)),
    }
    if x.dtype.kind in "fiu" and x.dtype.itemsize > 1 and x.dtype.type.__module__ == "numpy":
        kinds["big-endian"] = x.astype(x.dtype.newbyteorder(">"))
    return kinds


def _backend_kinds(backend: str, x: np.ndarray) -> dict[str, Any]:
    adapter = adapter_named(backend)
    if adapter.library_dtype(TYPES[castlike.onnx_type(x)]) is None:
        pytest.skip(f"{backend} cannot hold {castlike.onnx_type(x).name} here")
    y = adapter.from_numpy(x)
    # Indexing as the Array API standard has it (every axis named, or an ellipsis).
    kinds: dict[str, Any] = {
        "0-d": y[2, 3],
        "empty": y[:0, ...],
        "transposed": y.T,
        "slice": y[1:4, ...],
    }
    if backend == "torch":
        kinds["non-contiguous"] = y[:, ::3]
        kinds["expanded (stride 0)"] = y[0].expand(3, 8)
        kinds["narrowed"] = y.narrow(1, 2, 4)
    if backend in ("jax", "dask"):
        kinds["negative steps"] = y[::-1, ::-2]
    return kinds


def _snapshot(x: Any) -> bytes:
    host = to_host(x)
    return np.ascontiguousarray(host).tobytes()


@pytest.mark.parametrize("target", _KIND_TARGETS)
@pytest.mark.parametrize("source", _SOURCES)
def test_array_kinds_cast_like_contiguous_copies(
    backend: str, source: str, target: str, tmp_path: Path
) -> None:
    x = _base(source)
    if backend == "numpy":
        kinds: dict[str, Any] = _numpy_kinds(x, tmp_path)
    else:
        kinds = _backend_kinds(backend, x)
    adapter = adapter_named(backend)
    if (target == "STRING" and _refuses_strings(backend)) or (
        target != "STRING" and adapter.library_dtype(spec_of(_T[target])) is None
    ):
        for view in kinds.values():  # R10: refused by name, whatever the array's kind
            with pytest.raises(BackendTypeError, match=f"{backend} cannot hold {target}"):
                castlike.cast(view, target)
        return
    for name, view in kinds.items():
        before = _snapshot(view)
        result = castlike.cast(view, target)
        copy = np.array(to_host(view), order="C", copy=True)
        copy = copy.astype(copy.dtype.newbyteorder("="))
        expected = castlike.cast(copy, target)
        # A NumPy scalar gives a scalar back: for STRING, StringDType's scalar is a str.
        got = np.asarray(result) if isinstance(result, str) else to_host(result)
        assert tuple(got.shape) == tuple(expected.shape), name
        if target == "STRING":
            assert got.tolist() == np.asarray(expected).tolist(), name
        else:
            assert got.dtype == np.asarray(expected).dtype, name
            s, t = spec_of(_T[source]), spec_of(_T[target])
            expected_bits = NUMPY.bits(np.asarray(expected).reshape(-1), t)
            mismatch = compare_bits(got, expected_bits, s, t, copy)  # NaN per R3
            assert mismatch is None, f"{name}: {mismatch.describe(s, t)}"
        assert _snapshot(view) == before, f"{name}: the input changed"


# == Random arguments: only CastErrors come out ===================================================

_NUMERIC_DTYPES = [
    np.float32,
    np.float64,
    np.float16,
    np.int8,
    np.uint8,
    np.int32,
    np.int64,
    np.uint64,
    np.bool_,
    ">f4",
    ">i8",
    "U3",
    "S3",
    np.complex64,
    "M8[s]",
    "m8[s]",
]
_ML_DTYPES = [
    ml_dtypes.bfloat16,
    ml_dtypes.float8_e4m3fn,
    ml_dtypes.float8_e4m3fnuz,
    ml_dtypes.float8_e8m0fnu,
    ml_dtypes.int4,
    ml_dtypes.float4_e2m1fn,
]
_shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)
_plain_arrays = st.one_of(
    st.sampled_from(_NUMERIC_DTYPES).flatmap(lambda d: hnp.arrays(np.dtype(d), _shapes)),
    st.tuples(st.sampled_from(_ML_DTYPES), _shapes).flatmap(
        lambda ds: hnp.arrays(np.dtype(f"u{np.dtype(ds[0]).itemsize}"), ds[1]).map(
            lambda a, d=ds[0]: a.view(d)
        )
    ),
)
#: Layouts and kinds of array: views with negative strides, transposes, read-only, masked.
_ARRAY_KINDS = [
    lambda a: a,
    lambda a: a[..., ::-1] if a.ndim else a,
    lambda a: a.T,
    lambda a: np.asfortranarray(a),
    lambda a: _read_only(a),
    lambda a: np.ma.MaskedArray(a, mask=np.arange(a.size).reshape(a.shape) % 2 == 0),
]
_arrays = st.one_of(
    st.tuples(_plain_arrays, st.sampled_from(_ARRAY_KINDS)).map(lambda ak: ak[1](ak[0])),
    st.lists(st.one_of(st.text(max_size=6), st.binary(max_size=6), st.integers(), st.none())).map(
        lambda items: _object_array(items)
    ),
)
_python_inputs = st.one_of(
    st.none(),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.complex_numbers(),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=4),
    st.lists(st.lists(st.floats(), max_size=3), max_size=3),
    st.lists(st.one_of(st.integers(), st.floats(), st.text(max_size=3)), max_size=4),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.sampled_from([np.float32, dict, object(), set(), (), [], [[]], (1, (2,)), np.ma.masked]),
)
_type_likes = st.one_of(
    st.sampled_from([t.name for t in TYPES.values()]),
    st.sampled_from(["float8e4m3fn", " FLOAT ", "COMPLEX64", "UNDEFINED", "nonsense", "", "f4"]),
    st.integers(-3, 40),
    st.integers(),
    st.none(),
    st.booleans(),
    st.floats(),
    st.sampled_from([np.float32, np.int8, float, int, bool, str, bytes, object, dict, list]),
    st.sampled_from([np.int32(3), np.int64(5), np.uint8(1), np.float16(2), np.bool_(True)]),
    st.sampled_from([np.dtype("V3"), np.dtype("c8"), np.dtype("M8[s]"), np.dtype([("a", "f4")])]),
    st.sampled_from([ml_dtypes.bfloat16, ml_dtypes.int2, ml_dtypes.float6_e3m2fn]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    _arrays,
)
_options = st.fixed_dictionaries(
    {},
    optional={
        "saturate": st.one_of(st.booleans(), st.integers(0, 1), st.none(), st.text(max_size=2)),
        "round_mode": st.one_of(
            st.sampled_from(["up", "down", "nearest", "UP", "even"]), st.none(), st.integers()
        ),
        "opset": st.one_of(
            st.none(),
            st.integers(-2, 40),
            st.integers(),
            st.floats(),
            st.text(max_size=3),
            st.just(np.int64(19)),
            st.lists(st.integers(), max_size=1),
        ),
        "profile": st.one_of(
            st.sampled_from(["spec", "reference", "legacy", "SPEC", "ort"]), st.none()
        ),
        "errors": st.sampled_from(["raise", "coerce", "ignore", None, 1]),
    },
)


def _read_only(a: np.ndarray) -> np.ndarray:
    out = a.copy()
    out.flags.writeable = False
    return out


def _object_array(items: list[Any]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _maybe_on(backend: str, x: Any) -> Any:
    """``x`` on ``backend`` where it is a numeric NumPy array the library holds."""
    if backend == "numpy" or not isinstance(x, np.ndarray) or x.dtype.kind not in "biuf":
        return x
    try:
        return adapter_named(backend).from_numpy(x)
    except CastError:
        return x


# The strategies draw large nested arguments on purpose: only the size checks are waived.
@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    x=st.one_of(_arrays, _python_inputs),
    to=_type_likes,
    options=_options,
    op=st.sampled_from(["Cast", "CastLike", "castlike", "Foo", None, 1]),
)
def test_random_arguments_raise_only_cast_errors(
    backend: str, x: Any, to: Any, options: dict[str, Any], op: Any
) -> None:
    """Any arguments either raise a CastError or give a result of the promised kind.

    A cast keeps the input's shape and gives the requested type; ``onnx_type`` gives an
    ONNX type; ``can_cast`` gives a bool.
    """
    x = _maybe_on(backend, x)
    to = _maybe_on(backend, to)

    def computed(result: Any) -> Any:
        return result.compute() if backend == "dask" and hasattr(result, "compute") else result

    def check_cast(result: Any) -> None:
        result = computed(result)
        if hasattr(x, "shape"):
            assert tuple(result.shape) == tuple(x.shape)
        try:
            wanted = castlike.onnx_type(to)
        except CastError:
            return  # ``to`` named a type only through the cast's own rules
        assert castlike.onnx_type(result) == wanted

    checks: list[tuple[Any, Any]] = [
        (lambda: castlike.cast(x, to, **options), check_cast),
        (lambda: castlike.cast_like(x, to, **options), check_cast),
        (lambda: castlike.onnx_type(to), lambda t: assert_is_type(t)),
        (lambda: castlike.onnx_type(x), lambda t: assert_is_type(t)),
        (
            lambda: castlike.can_cast(x, to, op=op, opset=options.get("opset")),
            lambda b: assert_is_bool(b),
        ),
    ]
    for call, check in checks:
        try:
            result = call()
            check(result)
        except CastError:
            continue


def assert_is_type(t: Any) -> None:
    assert t in TYPES


def assert_is_bool(b: Any) -> None:
    assert isinstance(b, bool)
