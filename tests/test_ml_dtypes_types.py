"""Every dtype ml_dtypes exports is its ONNX type or a clear error (R1), so that a new type of
the next release (as 0.7's ``float8_e5m3fnu``) is caught here, not by a user.

Walked from ``dir(ml_dtypes)``: every scalar type it exports, as a source, a target and a
``like``.  A type with an ONNX counterpart casts (and round-trips its values); a complex one is
an :class:`UnsupportedTypeError`; any other is an :class:`UnknownTypeError` that names it.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import castlike
from castlike.backends.numpy import NUMPY_DTYPES
from castlike.errors import UnknownTypeError, UnsupportedTypeError

_EXPORTED = sorted(
    name
    for name in dir(ml_dtypes)
    if isinstance(getattr(ml_dtypes, name), type)
    and issubclass(getattr(ml_dtypes, name), np.generic)
)
_ONNX = {np.dtype(d): t for t, d in NUMPY_DTYPES.items()}


def test_the_walk_finds_the_known_types() -> None:
    # Guards the walk itself: these have been exported since ml_dtypes 0.5.
    assert {"bfloat16", "float8_e4m3fn", "int4", "float4_e2m1fn", "float8_e8m0fnu"} <= set(
        _EXPORTED
    )


@pytest.mark.parametrize("name", _EXPORTED)
def test_every_ml_dtypes_type_is_onnx_or_a_clear_error(name: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, name))
    x = np.ones(3, dtype)
    floats = np.array([0.0, 1.0, 2.0], np.float32)
    onnx = _ONNX.get(dtype)
    if onnx is not None:
        assert castlike.onnx_type(dtype) == onnx
        assert castlike.cast(floats, dtype).dtype == dtype
        assert castlike.cast_like(floats, x).dtype == dtype
        assert castlike.cast(x, "FLOAT").tolist() == [1.0, 1.0, 1.0]
        return
    error = UnsupportedTypeError if "complex" in name else UnknownTypeError
    for attempt in (
        lambda: castlike.cast(x, "FLOAT"),
        lambda: castlike.cast(floats, dtype),
        lambda: castlike.cast_like(floats, x),
    ):
        with pytest.raises(error, match=name):
            attempt()
