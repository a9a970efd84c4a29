"""The check the exhaustive and curated modules share: one (source, target, mode) on one
backend, against the oracle's cached answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import castlike
from castlike.backends import adapter_named
from castlike.errors import BackendTypeError
from castlike.spec.rules import Mode
from castlike.spec.types import TypeSpec
from castlike.testing import assert_cast_equal, oracle_bits


def mode_options(mode: Mode) -> dict[str, object]:
    """``cast`` keyword arguments for a mode."""
    return {
        "saturate": mode.saturate,
        "round_mode": mode.round_mode.value,
        "profile": mode.profile.value,
    }


def check_against_oracle(
    source: TypeSpec,
    target: TypeSpec,
    mode: Mode,
    backend: str,
    inputs: np.ndarray,
    cache_dir: Path,
    cache_key: str,
) -> None:
    """Cast ``inputs`` on ``backend`` and compare every bit with the oracle.

    Where the backend cannot hold a type (R10), assert the refusal instead: no array of the
    backend can have the source type, and a cast to the target raises BackendTypeError.
    """
    adapter = adapter_named(backend)
    options = mode_options(mode)
    if adapter.library_dtype(source) is None:
        with pytest.raises(BackendTypeError, match=source.name):
            adapter.from_numpy(inputs[:1])
        return
    if adapter.library_dtype(target) is None:
        with pytest.raises(BackendTypeError, match=target.name):
            castlike.cast(adapter.from_numpy(inputs[:1]), target.name, **options)
        return
    expected = oracle_bits(source, target, mode, inputs, cache_dir=cache_dir, cache_key=cache_key)
    result = castlike.cast(adapter.from_numpy(inputs), target.name, **options)
    assert_cast_equal(
        result,
        expected,
        source,
        target,
        inputs,
        expected_dtype=adapter.library_dtype(target),
        expected_shape=inputs.shape,
    )
