"""Coverage-guided fuzzing of the string parser (R9) with atheris, against the exact oracle.

Every input is a small array of strings, cast to one numeric type with ``errors="coerce"``.
Each element's result must have the bits of :func:`castlike.spec.strings.string_to_bits` (the
exact decimal reading of the spec, one element at a time; NaN where it is invalid), the only
exception allowed is the :class:`castlike.InvalidStringError` of a type without NaN, and no
input may take more than 10 ms per element.

Input layout (so that the seeds in ``fuzz/seeds`` are readable): byte 0 picks the target type,
byte 1 the array kind (bits 0-1), the profile (bit 2) and whether the text bytes are mapped
onto number-like characters (bit 3, which steers the fuzzer into the grammar); the rest is the
elements, separated by 0x1E.  Text kinds decode the bytes with ``surrogateescape``, so invalid
UTF-8 becomes lone surrogates.

Run it with ``nox -s fuzz`` (``nox -s fuzz -- SECONDS``), or directly:
``python fuzz/fuzz_strings.py -max_total_time=60 -timeout=10 CORPUS_DIR fuzz/seeds``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import atheris
import numpy as np

with atheris.instrument_imports(include=["castlike"]):
    import castlike
    from castlike.spec import strings as spec_strings
    from castlike.spec.opsets import Op
    from castlike.spec.plan import resolve
    from castlike.spec.reference import Exact, cast_value
    from castlike.spec.types import TYPES, OnnxType, spec_of

_T = OnnxType
TARGETS = [t for t in TYPES.values() if t.is_numeric]
PROFILES = ("spec", "reference")
KINDS = ("T", "U", "S", "object")  # T: StringDType
#: What bytes map onto with bit 3 of byte 1: the characters of R9's grammar and its literals.
ALPHABET = "0123456789" * 3 + ".eE+-" * 2 + " \t\n" + "infatyINFATYrueflsx_0x" + "\x00"
#: The slowest any input may be (per element), from the issue: a hang or a quadratic path.
MAX_SECONDS_PER_ELEMENT = 0.010
_DOUBLE = spec_of(_T.DOUBLE)
_STRING = spec_of(_T.STRING)


def _elements(data: bytes, kind: str, mapped: bool) -> np.ndarray:
    parts = data.split(b"\x1e")[:16]
    if mapped:
        parts = ["".join(ALPHABET[b % len(ALPHABET)] for b in p).encode() for p in parts]
    texts = [p.decode("utf-8", "surrogateescape") for p in parts]
    if kind == "T":
        # StringDType holds UTF-8 only: texts with surrogates go through an object array.
        try:
            return np.array(texts, dtype=np.dtypes.StringDType())
        except UnicodeEncodeError:
            return _objects(texts)
    if kind == "U":
        return np.array(texts, dtype="U")
    if kind == "S":
        return np.array(parts, dtype="S")
    return _objects([p if i % 2 else t for i, (p, t) in enumerate(zip(parts, texts, strict=True))])


def _objects(items: list[Any]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _expected(items: list[Any], target: Any, mode: Any) -> list[int | None]:
    return [spec_strings.string_to_bits(v, target, mode) for v in items]


def _cast(strings: np.ndarray, target: Any, profile: str) -> tuple[Any, float]:
    start = time.perf_counter()
    try:
        result: Any = castlike.cast(strings, target.name, profile=profile, errors="coerce")
    except castlike.InvalidStringError as error:
        result = error
    return result, time.perf_counter() - start


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    target = TARGETS[data[0] % len(TARGETS)]
    kind = KINDS[data[1] & 3]
    profile = PROFILES[(data[1] >> 2) & 1]
    strings = _elements(data[2:], kind, mapped=bool(data[1] & 8))
    mode = resolve(Op.CAST, _STRING, target, profile=profile).mode
    result, seconds = _cast(strings, target, profile)
    limit = MAX_SECONDS_PER_ELEMENT * max(strings.size, 1)
    for _ in range(3):  # the fastest of a few: a busy machine or a first call is no finding
        if seconds <= limit:
            break
        seconds = min(seconds, _cast(strings, target, profile)[1])
    else:
        raise AssertionError(
            f"{strings!r} -> {target.name} took {seconds * 1e3:.1f} ms for "
            f"{strings.size} element(s), more than {MAX_SECONDS_PER_ELEMENT * 1e3:.0f} ms each"
        )
    items = strings.tolist()
    expected = _expected(items, target, mode)
    if isinstance(result, castlike.InvalidStringError):
        # Only for a type without NaN, and only if some element is not a number.
        if spec_strings.has_nan(target) or all(e is not None for e in expected):
            raise AssertionError(f"{strings!r} -> {target.name}: unexpected {result}")
        return
    nan = cast_value(Exact.nan(), _DOUBLE, target, mode) if spec_strings.has_nan(target) else None
    want = [nan if e is None else e for e in expected]
    host = np.asarray(result).reshape(-1)
    got = host.view(f"uint{host.dtype.itemsize * 8}")
    if target.is_sub_byte:
        got = got & ((1 << target.bits) - 1)
    if got.tolist() != want:
        shown = ["invalid" if w is None else hex(w) for w in want]
        raise AssertionError(
            f"{strings!r} -> {target.name} ({profile}): got "
            f"{[hex(g) for g in got.tolist()]}, the oracle says {shown}"
        )


def _warm_up() -> None:
    """Build every table and template outside the timed calls."""
    texts = np.array(["1.5", "-2e-3", "12345678901234567890123", "x"] * 40)
    for target in TARGETS:
        for profile in PROFILES:
            for kind in KINDS:
                _cast(texts.astype(object if kind == "object" else kind), target, profile)


if __name__ == "__main__":
    _warm_up()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
