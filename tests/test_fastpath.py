"""The repeat-call path of castlike.cast: the same results as the first call, never a shortcut
past validation."""

from __future__ import annotations

import numpy as np
import pytest

import castlike
from castlike import _fastpath
from castlike.testing import fresh_caches


@pytest.fixture(autouse=True)
def _fresh() -> None:
    _fastpath.clear()


def test_repeat_calls_equal_the_first_and_return_new_arrays() -> None:
    x = np.linspace(-500, 500, 101, dtype=np.float32)
    first = castlike.cast(x, "FLOAT8E4M3FN", saturate=False)
    assert len(_fastpath._CASTS) == 1
    again = castlike.cast(x, "FLOAT8E4M3FN", saturate=False)
    assert again is not first and again.dtype == first.dtype
    assert again.tobytes() == first.tobytes()
    again[...] = 0
    assert castlike.cast(x, "FLOAT8E4M3FN", saturate=False).tobytes() == first.tobytes()


def test_options_of_another_type_are_validated_again() -> None:
    x = np.ones(4, dtype=np.float32)
    castlike.cast(x, "FLOAT8E4M3FN", saturate=True, opset=19)
    with pytest.raises(castlike.CastValueError, match="saturate must be True or False"):
        castlike.cast(x, "FLOAT8E4M3FN", saturate=1, opset=19)  # type: ignore[arg-type]
    with pytest.raises(castlike.OpsetError):
        castlike.cast(x, "FLOAT8E4M3FN", saturate=True, opset=19.0)  # type: ignore[arg-type]


def test_unhashable_arguments_meet_the_full_validation() -> None:
    """The repeat path looks a call's arguments up without checking them first: an argument
    that cannot be a key must still reach the full path's own error, not a TypeError."""
    x = np.ones(4, dtype=np.float32)
    castlike.cast(x, "INT8")
    with pytest.raises(castlike.CastTypeError):
        castlike.cast(x, ["INT8"])  # type: ignore[arg-type]
    with pytest.raises(castlike.CastValueError, match="profile"):
        castlike.cast(x, "INT8", profile=["spec"])  # type: ignore[arg-type]


def test_a_failed_call_is_not_remembered() -> None:
    x = np.ones(4, dtype=np.float32)
    for _ in range(2):
        with pytest.raises(castlike.DisallowedCastError):
            castlike.cast(x, "FLOAT8E4M3FN", opset=18)
    assert _fastpath._CASTS == {}


def test_dtype_and_byte_order_are_part_of_the_key() -> None:
    x = np.array([1.5, 300.0, -2.25], dtype=np.float32)
    castlike.cast(x, "INT8")
    swapped = x.astype(">f4")
    assert castlike.cast(swapped, "INT8").tolist() == [1, 127, -2]
    assert castlike.cast(x.astype(np.float64), "INT8").tolist() == [1, 127, -2]


def test_fresh_caches_forget_remembered_casts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A remembered cast would hide an engine replaced later; inside ``fresh_caches`` every
    call takes the full path, and nothing cast there is remembered after it."""
    from castlike.backends import adapter_named

    numpy_adapter = adapter_named("numpy")
    x = np.array([1.5, 300.0], dtype=np.float32)
    castlike.cast(x, "INT8")  # remembered

    class Doubling:
        def __init__(self, engine: object) -> None:
            self.engine = engine

        def cast(self, array: np.ndarray, plan: object) -> np.ndarray:
            return self.engine.cast(array, plan) * 2  # type: ignore[attr-defined]

    real = numpy_adapter.engine
    with monkeypatch.context() as m, fresh_caches():
        m.setattr(numpy_adapter, "engine", lambda: Doubling(real()))
        assert castlike.cast(x, "INT8").tolist() == [2, -2]
        assert castlike.cast(x, "INT8").tolist() == [2, -2]  # nothing remembered inside
        assert _fastpath._CASTS == {}
    assert _fastpath._CASTS == {}
    assert castlike.cast(x, "INT8").tolist() == [1, 127]


def test_a_full_memory_forgets_the_oldest_cast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the limit the oldest remembered cast makes room: a new combination still gets the
    repeat path (a process that has met many keeps it for the recent ones)."""
    monkeypatch.setattr(_fastpath, "_CASTS", {})
    monkeypatch.setattr(_fastpath, "_LIMIT", 2)
    x = np.arange(4, dtype=np.float32)
    for target in ("INT8", "INT16", "INT32"):
        castlike.cast(x, target)
    keys = list(_fastpath._CASTS)
    assert len(keys) == 2
    assert [key[2] for key in keys] == ["INT16", "INT32"]


def test_every_common_form_of_the_target_is_remembered_apart() -> None:
    """A target given as a name, a code, an OnnxType member, a NumPy dtype or a scalar type
    each takes the repeat path, under its own key: OnnxType.INT8 == 3, yet the key holds the
    type before the value, so no form stands in for another."""
    import ml_dtypes

    x = np.array([1.5, 300.0, -2.25, np.nan], dtype=np.float32)
    forms = ["INT8", 3, castlike.OnnxType.INT8, np.dtype(np.int8), np.int8]
    first = [castlike.cast(x, to) for to in forms]
    assert len(_fastpath._CASTS) == len(forms)
    for to, expected in zip(forms, first, strict=True):
        again = castlike.cast(x, to)
        assert again.dtype == np.int8 and again.tobytes() == expected.tobytes()
    assert first[0].tolist() == [1, 127, -2, 0]
    # A plain int equal to another type's code is another key, not another type's cast.
    assert castlike.cast(x, 1).dtype == np.float32
    assert castlike.cast(x, castlike.OnnxType.FLOAT).dtype == np.float32
    castlike.cast(x, ml_dtypes.float8_e4m3fn)
    assert len(_fastpath._CASTS) == len(forms) + 3


def test_a_class_with_its_own_metaclass_is_not_a_key() -> None:
    """A class whose metaclass defines ``__eq__`` or ``__hash__`` could run code in the lookup:
    such a target meets the full path's validation (and its error) every time."""

    class Meta(type):
        def __hash__(cls) -> int:
            raise AssertionError("hashed by the repeat path")

    class Hostile(metaclass=Meta):
        pass

    x = np.ones(2, dtype=np.float32)
    castlike.cast(x, "INT8")
    for _ in range(2):
        with pytest.raises(castlike.CastTypeError):
            castlike.cast(x, Hostile)  # type: ignore[arg-type]
    assert len(_fastpath._CASTS) == 1


def test_cast_like_takes_the_repeat_path_under_its_own_keys() -> None:
    """CastLike's repeat calls are remembered by ``like``'s exact type and dtype (an array) or
    by ``like`` itself (a target), apart from Cast's: CastLike's opsets begin at 15, so a
    remembered Cast must not answer a CastLike that its opset refuses."""
    import ml_dtypes

    x = np.array([1.5, 300.0, -2.25, np.nan], dtype=np.float32)
    like = np.zeros(3, dtype=ml_dtypes.float8_e4m3fn)
    first = castlike.cast_like(x, like)
    assert len(_fastpath._CASTS) == 1
    again = castlike.cast_like(x, np.ones(7, dtype=ml_dtypes.float8_e4m3fn))  # same key
    assert len(_fastpath._CASTS) == 1
    assert again is not first and again.tobytes() == first.tobytes()
    assert again.tobytes() == castlike.cast(x, "FLOAT8E4M3FN").tobytes()
    castlike.cast_like(x, "FLOAT8E4M3FN")
    castlike.cast_like(x, np.dtype(ml_dtypes.float8_e4m3fn))
    assert len(_fastpath._CASTS) == 4  # cast's own key, and two more forms of like
    # Cast at opset 13 is remembered; CastLike at 13 does not exist and still says so.
    castlike.cast(x, "FLOAT", opset=13)
    for _ in range(2):
        with pytest.raises(castlike.OpsetError):
            castlike.cast_like(x, np.zeros(1, np.float32), opset=13)
    # A like of another dtype is another key: never the remembered cast's result.
    assert castlike.cast_like(x, np.zeros(1, np.int8)).tolist() == [1, 127, -2, 0]


def test_cast_like_with_a_like_that_is_no_key_takes_the_full_path() -> None:
    x = np.ones(2, dtype=np.float32)
    assert castlike.cast_like(x, np.int8(0)).dtype == np.int8  # a NumPy scalar: no key
    strings = castlike.cast_like(x, np.array(["a"]))
    assert strings.tolist() == ["1.0", "1.0"]
    assert _fastpath._CASTS == {}


def test_a_like_key_passed_to_cast_is_validated() -> None:
    """The key object CastLike's repeat path uses is no target of cast(): passed as one, it
    meets the full validation (and its error) even once CastLike remembered that key."""
    x = np.ones(2, dtype=np.float32)
    like = np.zeros(1, dtype=np.int8)
    castlike.cast_like(x, like)
    key_target = _fastpath.like_target(like)
    assert key_target is not None
    for _ in range(2):
        with pytest.raises(castlike.CastTypeError):
            castlike.cast(x, key_target)


def test_a_call_with_every_option_at_its_default_takes_the_shortcut() -> None:
    """A NumPy cast that leaves every option at its default is remembered under the shortcut's
    key too, gives the first call's bits in a new array, and is forgotten with the rest."""
    x = np.linspace(-500, 500, 101, dtype=np.float32)
    first = castlike.cast(x, "INT16")
    assert list(_fastpath._DEFAULT_CASTS) == [(x.dtype, str, "INT16")]
    again = castlike.cast(x, "INT16")
    assert again is not first and again.tobytes() == first.tobytes()
    castlike.cast(x, "INT16", round_mode="down")  # an option given: no shortcut key
    castlike.cast(x, np.dtype(np.int8))
    assert len(_fastpath._DEFAULT_CASTS) == 2 and len(_fastpath._CASTS) == 3
    _fastpath.clear()
    assert _fastpath._DEFAULT_CASTS == {}


def test_the_shortcut_runs_what_it_remembered_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the shortcut finds is what it returns; inside paused() it finds nothing; options
    equal to the defaults but of another type, and targets that may not be keys, meet the full
    validation."""
    x = np.ones(4, dtype=np.float32)
    castlike.cast(x, "FLOAT8E4M3FN")
    key = (x.dtype, str, "FLOAT8E4M3FN")
    monkeypatch.setitem(_fastpath._DEFAULT_CASTS, key, lambda a: "remembered")
    assert castlike.cast(x, "FLOAT8E4M3FN") == "remembered"
    with _fastpath.paused():
        assert isinstance(castlike.cast(x, "FLOAT8E4M3FN"), np.ndarray)
    with pytest.raises(castlike.CastValueError, match="saturate must be True or False"):
        castlike.cast(x, "FLOAT8E4M3FN", saturate=1)  # type: ignore[arg-type]
    with pytest.raises(castlike.CastTypeError):
        castlike.cast(x, ["FLOAT8E4M3FN"])  # type: ignore[arg-type]


def test_cast_like_stays_out_of_the_shortcut() -> None:
    """CastLike's casts keep keys of their own (their opsets differ from Cast's)."""
    x = np.ones(4, dtype=np.float32)
    castlike.cast_like(x, np.zeros(2, dtype=np.int8))
    assert len(_fastpath._CASTS) == 1 and _fastpath._DEFAULT_CASTS == {}
