"""The command line at its edges: output that cannot be written, arguments that are not text,
and decimals whose exponent is far beyond any type.

Every failure is one line on stderr, a nonzero exit status and no traceback.  Decimal text is
read by the oracle's one bounded reader (:func:`castlike.spec.reference.read_decimal`), whose
time grows with the text's length, not with its exponent's value: the readings run in a
subprocess whose timeout bounds a hang (the unbounded reader computed ``10**999999999``), it
times nothing.
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from castlike.cli import main
from castlike.spec.reference import Exact, cast_value, read_decimal
from castlike.spec.rules import Mode, Profile, RoundMode
from castlike.spec.types import TYPES, OnnxType

# The command line casts NumPy arrays, whatever else is installed.
pytestmark = pytest.mark.numpy_session

ROOT = Path(__file__).parent.parent.parent
#: Bounds a hang; a reading takes what the interpreter's start-up takes.
HANG = 30

COMMAND = [sys.executable, "-m", "castlike"]
#: Closes file descriptor 1, then runs the command in its place (``castlike ... >&-``).
CLOSED_STDOUT = [
    sys.executable,
    "-c",
    "import os, sys; os.close(1); "
    "os.execv(sys.executable, [sys.executable, '-m', 'castlike', *sys.argv[1:]])",
]


def environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.pop("PYTHONIOENCODING", None)
    env.update(extra)
    return env


def run(argv: list[str | bytes], *, stdout: object = subprocess.PIPE, **extra: str):
    """Run a command line in a fresh interpreter: the finished process (text stdout/stderr)."""
    return subprocess.run(
        argv,
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=environment(**extra),
        cwd=ROOT,
        timeout=HANG,
        check=False,
    )


def assert_one_line_error(done: subprocess.CompletedProcess, status: int, text: str) -> None:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == status, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("castlike") and text in err, err


# -- output that cannot be written -------------------------------------------------------------

#: Commands that write to stdout: a long table, a short cast, an explanation, the version.
WRITERS = [
    ["types"],
    ["cast", "1.5", "--to", "FLOAT8E4M3FN"],
    ["explain", "0.1", "--to", "FLOAT"],
    ["matrix"],
    ["--version"],
]


@pytest.mark.parametrize("argv", WRITERS, ids=" ".join)
def test_a_pipe_closed_early(argv: list[str]) -> None:
    """``castlike types | head -1``: the reader is gone before the output is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before the command writes: every write fails, deterministically
    try:
        done = run([*COMMAND, *argv], stdout=write_end)
    finally:
        os.close(write_end)
    assert_one_line_error(done, 1, "cannot write the output: Broken pipe")


@pytest.mark.parametrize("argv", WRITERS, ids=" ".join)
def test_a_closed_stdout(argv: list[str]) -> None:
    """``castlike ... >&-``: an output nobody can read is an error, not a silent success."""
    done = run([*CLOSED_STDOUT, *argv])
    assert_one_line_error(done, 1, "standard output is closed")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("argv", WRITERS, ids=" ".join)
def test_a_full_disk(argv: list[str]) -> None:
    """``castlike ... >/dev/full``: also a short output, which only fails when flushed."""
    with open("/dev/full", "w") as full:
        done = run([*COMMAND, *argv], stdout=full)
    assert_one_line_error(done, 1, "cannot write the output: No space left on device")


def test_an_output_encoding_without_the_character() -> None:
    done = run(
        [*COMMAND, "cast", "é", "--from", "STRING", "--to", "STRING"], PYTHONIOENCODING="ascii"
    )
    assert_one_line_error(done, 1, "the output's encoding (ascii) has no '\\xe9'")


def test_a_writable_stdout_still_works() -> None:
    done = run([*COMMAND, "cast", "1.5", "--to", "FLOAT8E4M3FN"])
    assert done.returncode == 0 and not done.stderr
    assert done.stdout.decode().splitlines()[1].endswith("(0x3C)")


# -- arguments that are not text ---------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        [b"cast", b"\xff", b"--from", b"STRING", b"--to", b"FLOAT"],
        [b"cast", b"\xff", b"--to", b"FLOAT"],
        [b"cast", b"1", b"--to", b"FLOAT\xe9\xff"],
        [b"\xff"],
    ],
    ids=["STRING value", "number", "type", "command"],
)
def test_an_argument_that_is_not_utf8(argv: list[bytes]) -> None:
    done = run([*COMMAND, *argv])
    assert_one_line_error(done, 2, "is not UTF-8 text")
    assert b"b'\\xff'" in done.stderr or b"\\xe9\\xff" in done.stderr


def test_an_argument_that_is_not_utf8_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["cast", os.fsdecode(b"\xff"), "--from", "STRING", "--to", "FLOAT"])
    err = capsys.readouterr().err
    assert status == 2 and err == (
        "castlike: error: the argument b'\\xff' is not UTF-8 text, as castlike reads them\n"
    )


# -- decimals beyond every type ----------------------------------------------------------------


def result_bits(stdout: bytes) -> list[str]:
    return [line.rsplit("(", 1)[1].rstrip(")") for line in stdout.decode().splitlines()[1:]]


@pytest.mark.parametrize(
    ("value", "bits"),
    [
        ("1e999999999", "0x7F800000"),
        ("-1e999999999", "0xFF800000"),
        ("1e-999999999", "0x00000000"),
        ("-1e-999999999", "0x80000000"),
        ("1e" + "9" * 5000, "0x7F800000"),  # an exponent longer than int() reads
        ("-1e-" + "9" * 5000, "0x80000000"),
        ("1" * 5000, "0x7F800000"),  # more digits than int() reads
        ("0." + "0" * 5000 + "1", "0x00000000"),
    ],
    ids=["1e999999999", "-1e999999999", "1e-999999999", "-1e-999999999", "long exponent",
         "long negative exponent", "5000 digits", "5000 zeros"],
)  # fmt: skip
def test_cast_of_a_huge_exponent_is_read_at_once(value: str, bits: str) -> None:
    done = run([*COMMAND, "cast", value, "--to", "FLOAT"])
    assert done.returncode == 0, done.stderr
    assert result_bits(done.stdout) == [bits]


@pytest.mark.parametrize(
    ("value", "result", "rule", "held"),
    [
        ("1e999999999", "FLOAT Inf (0x7F800000)", "R3 Inf -> inf", "DOUBLE Inf"),
        ("1e-999999999", "FLOAT 0 (0x00000000)", "R3 zero -> zero", "DOUBLE 0"),
        ("-1e-999999999", "FLOAT -0 (0x80000000)", "R3 zero -> zero", "DOUBLE -0"),
    ],
)
def test_explain_of_a_huge_exponent_is_read_at_once(
    value: str, result: str, rule: str, held: str
) -> None:
    done = run([*COMMAND, "explain", value, "--to", "FLOAT"])
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode().splitlines()
    assert out[1:3] == [f"result       {result}", f"rule         {rule}"]
    assert out[3].startswith(f"input        {value} -> {held} (0x")


def test_a_huge_exponent_into_narrow_and_integer_sources() -> None:
    """Read exactly, then rounded once into --from: E5M2 saturates to its max, as the exact
    value does (Inf would stay Inf); an integer source says the value is outside it."""
    done = run([*COMMAND, "cast", "1e999999999", "--from", "FLOAT8E5M2", "--to", "FLOAT"])
    assert done.returncode == 0, done.stderr
    assert "FLOAT8E5M2 57344 (0x7B)" in done.stdout.decode()
    done = run([*COMMAND, "cast", "1e999999999", "--from", "INT8", "--to", "FLOAT"])
    assert_one_line_error(done, 2, "'1e999999999' is outside INT8 (-128 to 127)")
    done = run([*COMMAND, "cast", "1e-999999999", "--from", "INT8", "--to", "FLOAT"])
    assert_one_line_error(done, 2, "'1e-999999999' is not an integer, as INT8 values are")


def test_the_oracle_reads_a_huge_exponent_at_once() -> None:
    code = (
        "from castlike.spec.reference import Exact, cast_value\n"
        "from castlike.spec.rules import Mode\n"
        "from castlike.spec.types import TYPES_BY_NAME as T\n"
        "for text in ('1e999999999', '-1e999999999', '1e-999999999', '-1e-999999999'):\n"
        "    v = Exact.of(text)\n"
        "    print(hex(cast_value(v, T['DOUBLE'], T['FLOAT'], Mode())),"
        " hex(cast_value(v, T['DOUBLE'], T['INT4'], Mode())))\n"
    )
    done = run([sys.executable, "-c", code])
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split() == [
        "0x7f800000", "0x0",  # 10**999999999 is a multiple of 16: its low 4 bits are 0
        "0xff800000", "0x0",
        "0x0", "0x0",
        "0x80000000", "0x0",
    ]  # fmt: skip


# -- R9's grammar, and nothing else ------------------------------------------------------------


@pytest.mark.parametrize("value", ["1/3", "1_000", "-0x10", "0x1p3", "1e", "e5", ".", "--1", "1e+"])
def test_text_outside_the_grammar_is_an_error_naming_it(capsys, value: str) -> None:
    for command in ("cast", "explain"):
        status = main([command, "--to", "FLOAT", "--", value])
        err = capsys.readouterr().err
        assert status == 2 and len(err.splitlines()) == 1, err
        assert f"{value!r} is not a number" in err and "R9's grammar" in err, err
        assert "[+-]digits[.digits][(e|E)[+-]digits], inf, infinity or nan" in err
    with pytest.raises(ValueError, match="R9's grammar"):
        Exact.of(value)


def test_0x_is_a_bit_pattern_of_a_numeric_source_and_text_of_a_string_one(capsys) -> None:
    assert main(["cast", "0x10", "--from", "FLOAT8E4M3FN", "--to", "FLOAT"]) == 0
    assert "FLOAT8E4M3FN 0.03125 (0x10)" in capsys.readouterr().out
    assert main(["explain", "0x10", "--from", "STRING", "--to", "FLOAT"]) == 2
    assert "'0x10' is not a number: R9's grammar is" in capsys.readouterr().err


def test_negative_numbers_are_values_not_options(capsys) -> None:
    """argparse takes ``-1e-3`` and ``-inf`` for options unless told otherwise."""
    assert main(["cast", "-1e-3", "-inf", "-.5", "-5.", "-NaN", "--to", "FLOAT16"]) == 0
    assert result_bits(capsys.readouterr().out.encode()) == [
        "0x9419", "0xFC00", "0xB800", "0xC500", "0xFE00"
    ]  # fmt: skip


# -- the oracle's representatives are exact ----------------------------------------------------


def _texts() -> list[str]:
    """Decimals past the bounds of the reader, at them and within, with long digit strings."""
    rng = random.Random(9)
    texts = ["1e401", "1.5e401", "2.5e401", "5e-401", "-7e-401", "1" * 1300, "9" * 1200 + "e-800"]
    texts += ["1" * 500 + ".5", "3" * 500 + ".5", "1" * 500 + ".50000001", "0." + "0" * 1200 + "1"]
    for exponent in (400, 401, 402, 450, 700, -400, -401, -402, -450, -1200, 300, -300, 0, 5):
        for _ in range(3):
            whole = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 80)))
            frac = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 80)))
            texts.append(f"{rng.choice(['', '-'])}{whole}.{frac}e{exponent}")
    return texts


@pytest.mark.parametrize("source", ["DOUBLE", "INT64", "UINT8"])
def test_every_rule_casts_a_representative_as_the_value_itself(source: str) -> None:
    """Past 10**+-400 the reader keeps a representative, not the value: every numeric target,
    in every mode and profile, from a float source (R3-R7, with the wrapping of the 4- and
    2-bit integers) and from integer ones (R8 keeps the low bits), gives the bits of the
    exact value (Fraction reads these texts, slowly but exactly)."""
    s = TYPES[OnnxType[source]]
    targets = [t for t in TYPES.values() if t.is_numeric]
    flags = (True, False)
    modes = [Mode(*m) for m in itertools.product(flags, RoundMode, Profile, flags)]
    for text in _texts():
        read = read_decimal(text)
        assert read is not None, text
        q = Fraction(text)
        exact = Exact("finite", text.startswith("-"), abs(q))
        for t, mode in itertools.product(targets, modes):
            assert cast_value(read, s, t, mode) == cast_value(exact, s, t, mode), (text, t, mode)
