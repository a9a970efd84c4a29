"""R6 on every backend: FLOAT8E8M0 judges range on x itself, before rounding."""

from __future__ import annotations

import numpy as np
import pytest

import castlike
from castlike.backends import adapter_named
from castlike.errors import BackendTypeError
from castlike.testing import to_host

#: (value, cast options, expected bits): the examples of R6 and the ends of the range.
CASES = [
    (2e38, {"round_mode": "nearest", "saturate": False}, 0xFF),
    (2e38, {"round_mode": "down", "saturate": False}, 0xFF),
    (2e38, {"round_mode": "nearest"}, 0xFE),
    (0.75 * 2.0**-127, {"round_mode": "nearest", "saturate": False}, 0xFF),
    (0.75 * 2.0**-127, {"round_mode": "up", "saturate": False}, 0xFF),
    (0.75 * 2.0**-127, {"round_mode": "nearest"}, 0x00),
    (1.5 * 2.0**127, {"round_mode": "down"}, 0xFE),
    (2.0**127, {"round_mode": "up", "saturate": False}, 0xFE),
    (2.0**-127, {"round_mode": "down", "saturate": False}, 0x00),
    (1e300, {"round_mode": "down"}, 0xFE),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["FLOAT", "DOUBLE"])
@pytest.mark.parametrize(("value", "options", "expected"), CASES)
def test_range_is_judged_on_x(
    backend: str, dtype: type, value: float, options: dict[str, object], expected: int
) -> None:
    host = np.array([value], dtype=np.float64)
    with np.errstate(over="ignore"):
        host = host.astype(dtype)
    if dtype is np.float32 and (value > 3.4e38):
        pytest.skip("beyond FLOAT: the value is Inf there")
    adapter = adapter_named(backend)
    if adapter.library_dtype(castlike.OnnxType.DOUBLE.spec) is None and dtype is np.float64:
        pytest.skip(f"{backend} holds no DOUBLE here")
    x = adapter.from_numpy(host)
    if adapter.library_dtype(castlike.OnnxType.FLOAT8E8M0.spec) is None:
        with pytest.raises(BackendTypeError, match="cannot hold FLOAT8E8M0"):  # R10
            castlike.cast(x, "FLOAT8E8M0", **options)
        return
    out = to_host(castlike.cast(x, "FLOAT8E8M0", **options))
    assert out.view(np.uint8).tolist() == [expected]
