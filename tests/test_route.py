"""The route of a cast is decided once, by the spec, and every engine carries it out.

The decisive test changes one route in the spec alone (a bound and a special result of FLOAT
-> INT8) and checks that the pure engine, the native kernels and torch all follow it, with
equal bits: no engine decides that cast on its own.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import castlike
from castlike import _native
from castlike.backends import adapter_named
from castlike.spec import route as spec_route
from castlike.spec.route import Family, route_for
from castlike.spec.rules import Mode, Profile
from castlike.spec.types import OnnxType, spec_of
from castlike.testing import clear_caches, fresh_caches, numeric_types

_T = OnnxType
_FLOAT, _INT8 = spec_of(_T.FLOAT), spec_of(_T.INT8)

#: The changed route: NaN -> 42 instead of 0, saturation at 100 instead of 127.
_NAN_RESULT, _HIGH = 42, 100.0
_INPUTS = np.array([np.nan, 1e9, 5.7, -1e9, 99.5, 100.0, 127.0], np.float32)
_CHANGED = [42, 100, 5, -128, 99, 100, 100]


@pytest.fixture
def changed_route(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """FLOAT -> INT8 with another NaN result and upper bound, changed in the spec only."""
    original = spec_route._route

    def changed(source: Any, target: Any, mode: Mode, caps: Any) -> Any:
        r = original(source, target, mode, caps)
        if source == _FLOAT and target == _INT8:
            assert r.saturation is not None
            low, _, limit = r.saturation
            r = dataclasses.replace(r, nan_result=_NAN_RESULT, saturation=(low, _HIGH, limit))
        return r

    with monkeypatch.context() as m, fresh_caches():
        m.setattr(spec_route, "_route", changed)
        yield


def _int8(x: Any) -> list[int]:
    return np.asarray(x).astype(np.int64).tolist()


def test_the_unchanged_route_is_r7() -> None:
    assert _int8(castlike.cast(_INPUTS, "INT8")) == [0, 127, 5, -128, 99, 100, 127]


@pytest.mark.usefixtures("changed_route")
@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_a_route_changed_in_the_spec_changes_every_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    results = {"numpy kernels": castlike.cast(_INPUTS, "INT8")}
    assert _native.module() is not None, "the native kernels are not built"
    with monkeypatch.context() as m:
        m.setattr(_native, "module", lambda: None)
        clear_caches()  # the repeat-call path remembers the kernel
        results["numpy pure engine"] = castlike.cast(_INPUTS, "INT8")
    clear_caches()
    if importlib.util.find_spec("torch") is not None:
        import torch

        t = torch.from_numpy(_INPUTS.copy())
        results["torch native kernels"] = castlike.cast(t, "INT8").numpy()
        with monkeypatch.context() as m:
            m.setenv("CASTLIKE_TORCH_NATIVE", "0")  # torch's own ops, by the shared engine
            results["torch ops"] = castlike.cast(t, "INT8").numpy()
            compiled = torch.compile(lambda a: castlike.cast(a, "INT8"), fullgraph=True)
            results["torch.compile"] = compiled(t).numpy()
    for name, result in results.items():
        assert _int8(result) == _CHANGED, name


def test_every_pair_has_a_route_on_every_backend() -> None:
    """Every (source, target, mode) of the numeric types routes on each installed backend,
    and the native kernels' routes name a kernel or leave the cast to the pure engine."""
    backends = ["numpy"]
    if importlib.util.find_spec("torch") is not None:
        backends.append("torch")
    for backend in backends:
        caps = adapter_named(backend).capabilities()
        for s in numeric_types():
            for t in numeric_types():
                for profile in Profile:
                    r = route_for(s, t, Mode(saturate=False, profile=profile), caps)
                    assert isinstance(r.family, Family)
                    assert r.mode == Mode(saturate=False, profile=profile).effective_for(t)


def test_routes_are_plain_values() -> None:
    """A route is hashable and equal for equal inputs (the engines cache on it)."""
    caps = adapter_named("numpy").capabilities()
    a = route_for(_FLOAT, _INT8, Mode(), caps)
    b = route_for(_FLOAT, _INT8, Mode(round_mode=castlike.spec.RoundMode.DOWN), caps)
    assert a == b and hash(a) == hash(b)
    assert a.family is Family.SATURATING_TRUNCATION and a.nan_result == 0
