"""Strided CPU tensors under ``torch.compile``: the native operator's fake and real results
agree on their layout, and compiled casts give the eager bits and strides.

The real operator writes its result in the layout :func:`result_strides` gives (the input's
own when the input is dense, else row-major); its fake implementation must say the same, or
Inductor's size assertion fails and, without it, the compiled graph reads the result's bytes
in the wrong order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch.compile layout tests need PyTorch")

import castlike  # noqa: E402
from castlike import _native  # noqa: E402
from castlike.backends import adapter_named  # noqa: E402
from castlike.backends._torch_compile import result_strides  # noqa: E402
from castlike.spec.rules import Mode  # noqa: E402
from castlike.spec.types import TYPES, OnnxType  # noqa: E402

pytestmark = [
    pytest.mark.skipif(
        _native.module() is None, reason="castlike's native extension is not built or is disabled"
    ),
    pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
]

NUMPY = adapter_named("numpy")
TORCH = adapter_named("torch")


def _values(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Values that exercise rounding, overflow and NaN in every target below."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(n)
    v = rng.standard_normal(n) * np.exp2(rng.integers(-12, 12, n))
    special = [np.nan, np.inf, -1e6, 0.0]
    v[: len(special)] = special[:n]
    return torch.from_numpy(v).to(dtype).reshape(shape)


#: name -> (make the input from a dtype, whether it is dense: its layout is kept).
LAYOUTS: dict[str, tuple[Callable[[torch.dtype], torch.Tensor], bool]] = {
    "contiguous": (lambda dt: _values((2, 3, 4, 5), dt), True),
    "channels_last": (
        lambda dt: _values((2, 3, 4, 5), dt).contiguous(memory_format=torch.channels_last),
        True,
    ),
    "channels_last_3d": (
        lambda dt: _values((2, 3, 4, 5, 6), dt).contiguous(memory_format=torch.channels_last_3d),
        True,
    ),
    "transposed": (lambda dt: _values((2, 3, 4, 5), dt).transpose(1, 3), True),
    "sliced": (lambda dt: _values((2, 6, 4, 10), dt)[:, ::2, 1:, ::3], False),
    "expanded": (lambda dt: _values((1, 3, 1, 5), dt).expand(2, 3, 4, 5), False),
    "size-one dims": (lambda dt: _values((3, 1, 5), dt).transpose(0, 2), True),
    "zero-d": (lambda dt: _values((1,), dt).reshape(()), True),
    "empty": (lambda dt: _values((0, 3), dt).t(), True),
}

#: (source, target): through the native operator (a float8, a 16-bit float, an 8-bit integer,
#: a type that crosses the graph as bytes, FLOAT to FLOAT16, INT8 and BOOL) and through torch
#: ops that Inductor fuses into one loop (FLOAT to FLOAT8E4M3FN where Inductor converts to
#: float8 in vectors; the test below forces each way on every CPU; the half widenings into
#: FLOAT and FLOAT16 -> DOUBLE, always).
PAIRS = [
    ("FLOAT16", "FLOAT"),
    ("BFLOAT16", "FLOAT"),
    ("FLOAT16", "DOUBLE"),
    ("FLOAT16", "FLOAT8E4M3FN"),
    ("FLOAT16", "FLOAT16"),
    ("FLOAT16", "INT8"),
    ("FLOAT16", "INT4"),
    ("FLOAT", "FLOAT8E4M3FN"),
    ("FLOAT", "FLOAT16"),
    ("FLOAT", "INT8"),
    ("FLOAT", "FLOAT8E8M0"),
    ("FLOAT", "BOOL"),
]


def _bits(y: object, target: str) -> np.ndarray:
    return NUMPY.bits(TORCH.to_numpy(y), TYPES[OnnxType[target]])


def _row_major(shape: torch.Size) -> tuple[int, ...]:
    return torch.empty(shape).stride()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_result_strides_keep_a_dense_layout_and_are_row_major_otherwise(layout: str) -> None:
    make, dense = LAYOUTS[layout]
    x = make(torch.float16)
    expected = x.stride() if dense else _row_major(x.shape)
    assert result_strides(x) == expected
    if dense:  # the layout torch's own .to() keeps
        assert torch.empty_like(x).stride() == expected


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_native_operator_fake_and_real_agree(layout: str) -> None:
    """torch's own check of a custom operator: the fake implementation's result has the real
    one's shape, dtype and strides, also under AOT dispatch with dynamic shapes (which
    compares values as numbers: hence a target without NaN)."""
    x = LAYOUTS[layout][0](torch.float16)
    m = Mode()
    args = (x, int(OnnxType.FLOAT16), int(OnnxType.INT8), m.saturate)
    args += (m.round_mode.value, m.profile.value, m.inf_to_fnuz_is_nan)
    torch.library.opcheck(torch.ops.castlike.native_cast.default, args)


#: Each pair with Inductor's float8 loop off (the native operator), and FLOAT to FLOAT8E4M3FN
#: with it on as well (torch's ``to`` in Inductor's loop): both ways on every CPU.
_COMPILED_WAYS = [(s, t, False) for s, t in PAIRS] + [("FLOAT", "FLOAT8E4M3FN", True)]


@pytest.mark.parametrize(("source", "target", "float8_loop"), _COMPILED_WAYS, ids=str)
def test_compiled_equals_eager_on_every_layout(
    source: str, target: str, float8_loop: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fullgraph=True, Inductor's defaults (size_asserts on): the same bits and strides as the
    eager cast, and the bits of the NumPy backend on the same values.  FLOAT to FLOAT8E4M3FN
    runs both ways whatever this CPU is: Inductor's loop and the native operator."""
    from castlike.backends import torch as backend

    monkeypatch.setattr(backend, "_INDUCTOR_FLOAT8_IN_VECTORS", float8_loop)
    dtype = TORCH.library_dtype(TYPES[OnnxType[source]])
    for layout, (make, dense) in LAYOUTS.items():
        x = make(dtype)
        before = x.clone()
        torch.compiler.reset()  # each layout compiles afresh, far from the recompile limit
        with torch._inductor.config.patch(size_asserts=True):
            f = torch.compile(lambda a: castlike.cast(a, target), fullgraph=True)
            compiled = f(x)
        eager = castlike.cast(x, target)
        reference = castlike.cast(TORCH.to_numpy(x.contiguous()), target)
        expected_bits = NUMPY.bits(reference, TYPES[OnnxType[target]])
        assert np.array_equal(_bits(eager, target), expected_bits), layout
        assert np.array_equal(_bits(compiled, target), expected_bits), layout
        assert compiled.dtype == eager.dtype and compiled.shape == x.shape, layout
        # Strides of an empty result are not observable through any element, and Inductor's
        # fused loops choose them as they like (one gave (1, 1) for (1, 3)).
        if x.numel() > 0:
            assert compiled.stride() == eager.stride(), layout
        if dense:
            assert eager.stride() == x.stride(), layout  # channels_last in, channels_last out
        assert np.array_equal(_bits(x, source), _bits(before, source)), layout  # untouched
