"""The library's errors: options, inputs of no ONNX type and buffer objects.

Every problem with an argument is a castlike.CastError whose message names the argument that
is wrong; the caller's objects never make castlike raise their own exceptions.
"""

from __future__ import annotations

import array
from typing import Any

import numpy as np
import pytest

import castlike
from castlike import CastError, CastTypeError, CastValueError, UnsupportedTypeError

OPTIONS = ["saturate", "round_mode", "opset", "profile", "errors"]
METHODS = ["__str__", "__repr__", "__hash__", "__eq__", "__bool__", "__format__", "lower"]


class Boom(Exception):
    """The exception an option object raises (no castlike error, nor a TypeError)."""


def _raising(base: type, methods: list[str]) -> Any:
    """An instance of a subclass of ``base`` whose ``methods`` raise :class:`Boom`."""

    def boom(self: Any, *args: Any) -> Any:
        raise Boom(f"{type(self).__name__} was asked something")

    namespace = dict.fromkeys(methods, boom)
    if "__eq__" in methods:
        namespace["__ne__"] = boom
    cls = type(f"Raising{base.__name__.title()}", (base,), namespace)
    if base is str:
        return cls("up")
    if base is int:
        return cls(19)
    return cls()


OPTION_OBJECTS = {
    "object raising everything": _raising(object, METHODS),
    "object raising hash": _raising(object, ["__hash__"]),
    "object raising eq": _raising(object, ["__eq__"]),
    "object raising str and repr": _raising(object, ["__str__", "__repr__"]),
    "object raising bool": _raising(object, ["__bool__"]),
    "str raising everything": _raising(str, METHODS),
    "int raising everything": _raising(int, [*METHODS, "__lt__", "__gt__", "__int__", "__index__"]),
    "numpy array of two": np.array(["raise", "coerce"]),
    "numpy array of one": np.array(["raise"]),
}


#: A str or int subclass is the value it holds ("up", 19), read by str's and int's own methods.
VALID = {("round_mode", "str raising everything"), ("opset", "int raising everything")}


@pytest.mark.parametrize("name", list(OPTION_OBJECTS))
@pytest.mark.parametrize("option", OPTIONS)
def test_option_objects_give_cast_errors(option: str, name: str) -> None:
    value = OPTION_OBJECTS[name]
    x = np.array([1.5, 2.5], np.float32)
    calls = [
        lambda: castlike.cast(x, "FLOAT8E4M3FN", **{option: value}),
        lambda: castlike.cast_like(x, np.zeros(1, np.float16), **{option: value}),
        lambda: castlike.cast(np.array(["1.5"]), "FLOAT", **{option: value}),
    ]
    for call in calls:
        if (option, name) in VALID:
            call()  # no exception of the object's own
            continue
        # The message names the option that is wrong (Boom, or a TypeError, fails the test).
        with pytest.raises((CastValueError, CastTypeError), match=option):
            call()


def test_option_objects_are_read_by_their_base_type() -> None:
    # A str subclass whose methods raise is still the str it holds; an int subclass the int.
    up = _raising(str, METHODS)
    y = castlike.cast(np.array([3.0]), "FLOAT8E8M0", round_mode=up)
    assert (
        y.view(np.uint8).tolist()
        == castlike.cast(np.array([3.0]), "FLOAT8E8M0").view(np.uint8).tolist()
    )
    nineteen = _raising(int, [*METHODS, "__lt__", "__gt__", "__int__", "__index__"])
    with pytest.raises(castlike.DisallowedCastError, match=r"opset 19\)"):
        castlike.cast(np.array([1.0]), "FLOAT4E2M1", opset=nineteen)


def test_can_cast_op_and_opset_objects() -> None:
    for value in OPTION_OBJECTS.values():
        with pytest.raises(CastError):
            castlike.can_cast("FLOAT", "INT8", op=value)
        if not isinstance(value, int):
            with pytest.raises(castlike.OpsetError):
                castlike.can_cast("FLOAT", "INT8", opset=value)


TARGET_OBJECTS = {k: v for k, v in OPTION_OBJECTS.items() if k.startswith(("object", "str"))}


@pytest.mark.parametrize("value", list(TARGET_OBJECTS.values()), ids=list(TARGET_OBJECTS))
def test_target_objects_give_cast_errors(value: Any) -> None:
    with pytest.raises(CastTypeError):
        castlike.cast(np.array([1.0]), value)
    with pytest.raises(CastTypeError):
        castlike.onnx_type(value)


def test_errors_as_an_array_is_named() -> None:
    # NumPy's "truth value of an array is ambiguous" once escaped from the check.
    for errors in (np.array(["raise", "coerce"]), np.array("raise"), np.str_("coerce")):
        if isinstance(errors, str):  # a str subclass holding a valid value is that value
            y = castlike.cast(np.array(["x"]), "FLOAT", errors=errors)
            assert np.isnan(y).all()
            continue
        with pytest.raises(CastValueError, match=r"errors must be 'raise' or 'coerce', got array"):
            castlike.cast(np.array(["1"]), "FLOAT", errors=errors)


# == Inputs of no ONNX type: the error is about the input, not the target ======================

NO_ONNX_TYPE = {
    "datetime64": (np.array(["2020-01-01", "NaT"], "datetime64[D]"), "datetime64"),
    "timedelta64": (np.array([1, 2], "timedelta64[s]"), "timedelta64"),
    "complex": (np.array([1 + 2j]), "complex"),
    "complex64 scalar": (np.complex64(1), "complex"),
    "object of numbers": (np.array([1, 2.5], dtype=object), "object array"),
    "object of other objects": (np.array([object()], dtype=object), "object array"),
}


@pytest.mark.parametrize("target", ["FLOAT", "INT64", "STRING"])
@pytest.mark.parametrize("case", list(NO_ONNX_TYPE.values()), ids=list(NO_ONNX_TYPE))
def test_inputs_of_no_onnx_type_name_the_input(case: tuple[Any, str], target: str) -> None:
    x, what = case
    for errors in ("raise", "coerce"):
        with pytest.raises(UnsupportedTypeError) as info:
            castlike.cast(x, target, errors=errors)
        message = str(info.value)
        assert what in message
        assert message.startswith("x ") or " x is " in message  # it speaks of the input
        assert "pass an ONNX name" not in message  # no advice about the target


def test_datetime_advice_is_what_to_cast_instead() -> None:
    x = np.array(["2020-01-01", "NaT"], "datetime64[s]")
    with pytest.raises(UnsupportedTypeError, match=r"x\.astype\(numpy\.int64\)"):
        castlike.cast(x, "DOUBLE")
    ticks = castlike.cast(x.astype(np.int64), "DOUBLE")  # the advice works
    assert ticks.tolist() == [1577836800.0, float(np.iinfo(np.int64).min)]


def test_unknown_source_dtypes_name_the_input() -> None:
    x = np.zeros(2, dtype=[("a", "f4")])
    with pytest.raises(castlike.UnknownTypeError, match=r"^x holds .* values, which no ONNX"):
        castlike.cast(x, "FLOAT")


def test_dask_inputs_of_no_onnx_type_name_the_input() -> None:
    da = pytest.importorskip("dask.array", reason="dask is not installed (castlike[dask])")
    x = da.from_array(np.array(["2020-01-01"], "datetime64[D]"), chunks=1)
    with pytest.raises(UnsupportedTypeError, match=r"^x holds datetime64 values"):
        castlike.cast(x, "FLOAT")


# == Buffer objects: read as numpy.asarray reads them ===========================================

BUFFERS = {
    "bytearray": bytearray(b"12\xff"),
    "memoryview of bytes": memoryview(b"12\xff"),
    "memoryview of float32": memoryview(np.array([1.5, -2.25], np.float32)),
    "array.array of int16": array.array("h", [1, -300]),
    "memoryview 2-D": memoryview(np.arange(6, dtype=np.int32).reshape(2, 3)),
}


@pytest.mark.parametrize("target", ["FLOAT", "INT8", "STRING"])
@pytest.mark.parametrize("buffer", list(BUFFERS.values()), ids=list(BUFFERS))
def test_buffer_objects_are_arrays_of_their_item_type(buffer: Any, target: str) -> None:
    # R10: Python objects are taken as numpy.asarray takes them.  A buffer is an array of its
    # item type (bytearray: UINT8 codes), not text: bytes, not bytearray, are a string.
    as_numpy = np.asarray(buffer)
    assert as_numpy.dtype.kind in "iuf"
    y = castlike.cast(buffer, target)
    expected = castlike.cast(as_numpy, target)
    assert y.dtype == expected.dtype and y.shape == as_numpy.shape
    assert y.tolist() == expected.tolist()


def test_bytearray_is_byte_codes_and_bytes_is_text() -> None:
    assert castlike.cast(bytearray(b"12"), "FLOAT").tolist() == [49.0, 50.0]
    assert float(castlike.cast(b"12", "FLOAT")) == 12.0
    assert castlike.onnx_type(np.asarray(bytearray(b"1"))) is castlike.OnnxType.UINT8
