"""The ``castlike`` command: each subcommand, its output in pipes, and its error handling."""

from __future__ import annotations

import subprocess
import sys

import pytest

import castlike
from castlike.cli import main
from castlike.cli._common import install_hint
from castlike.cli._table import plain_table


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command in this process: (exit status, stdout, stderr)."""
    try:
        status = main(list(argv))
    except SystemExit as exc:  # argparse's own errors, --help and --version
        status = int(exc.code or 0)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def result_bits(out: str) -> list[str]:
    # Each value line ends with "(0x..)" of the result.
    return [line.rsplit("(", 1)[1].rstrip(")") for line in out.splitlines()[1:]]


def widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


VALUES = ["0.1", "448", "500", "1e6", "nan", "inf", "-0.0"]


def test_cast_done_when(capsys) -> None:
    status, out, _ = run(capsys, "cast", *VALUES, "--to", "FLOAT8E4M3FN")
    assert status == 0
    assert result_bits(out) == ["0x1D", "0x7E", "0x7E", "0x7E", "0x7F", "0x7E", "0x80"]
    status, out, _ = run(capsys, "cast", *VALUES, "--to", "FLOAT8E4M3FN", "--no-saturate")
    assert result_bits(out) == ["0x1D", "0x7E", "0x7F", "0x7F", "0x7F", "0x7F", "0x80"]


def test_cast_from_bits_and_types(capsys) -> None:
    status, out, _ = run(capsys, "cast", "0x7E", "0x80", "--from", "FLOAT8E4M3FN", "--to", "FLOAT")
    assert status == 0 and result_bits(out) == ["0x43E00000", "0x80000000"]
    status, out, _ = run(capsys, "cast", "9", "2.5", "--from", "FLOAT", "--to", "INT4")
    assert result_bits(out) == ["0x9", "0x2"]
    status, out, _ = run(capsys, "cast", "3", "--to", "FLOAT8E8M0", "--round-mode", "down")
    assert result_bits(out) == ["0x80"]
    status, out, _ = run(
        capsys,
        "cast",
        "1.0625000000000009",
        "--to",
        "FLOAT8E4M3FN",
        "--profile",
        "reference:ml_dtypes-0.6",
    )
    assert result_bits(out) == ["0x38"]


def test_type_codes_are_accepted_as_the_api_accepts_them(capsys) -> None:
    by_code = run(capsys, "cast", "1.5", "500", "--from", "1", "--to", "17")
    by_name = run(capsys, "cast", "1.5", "500", "--from", "FLOAT", "--to", "FLOAT8E4M3FN")
    assert by_code == by_name and by_code[0] == 0
    assert castlike.cast(1.5, 17).view("uint8") == 0x3C
    assert result_bits(by_code[1]) == ["0x3C", "0x7E"]


def test_cast_to_and_from_string(capsys) -> None:
    status, out, err = run(capsys, "cast", "1.5", "0.1", "--to", "STRING")
    assert status == 0 and not err
    assert out.splitlines()[1].endswith("STRING '1.5'")
    assert out.splitlines()[2].endswith("STRING '0.1'")
    status, out, _ = run(
        capsys, "cast", "100", "100.5", "-2.7", "--from", "STRING", "--to", "INT32"
    )
    assert status == 0
    assert result_bits(out) == ["0x00000064", "0x00000064", "0xFFFFFFFE"]
    status, out, _ = run(capsys, "cast", "0.1", "--from", "STRING", "--to", "FLOAT8E4M3FN")
    assert result_bits(out) == ["0x1D"]


def test_explain_string_target_and_source(capsys) -> None:
    status, out, _ = run(capsys, "explain", "1.5", "--to", "STRING")
    assert status == 0 and "result       STRING '1.5'" in out and "R9" in out
    status, out, _ = run(capsys, "explain", "100.7", "--from", "STRING", "--to", "INT32")
    assert status == 0
    assert "result       INT32 100 (0x00000064)" in out
    assert "R7 truncate toward zero" in out and "1007/10" in out
    status, out, _ = run(capsys, "explain", "true", "--from", "STRING", "--to", "BOOL")
    assert status == 0 and "result       BOOL 1 (0x1)" in out


def test_explain_puts_the_rule_first(capsys) -> None:
    status, out, _ = run(capsys, "explain", "464", "--to", "FLOAT8E4M3FN", "--no-saturate")
    assert status == 0
    lines = out.splitlines()
    assert lines[1] == "result       FLOAT8E4M3FN 448 (0x7E)"
    assert lines[2] == "rule         R4 round to nearest, ties to even"
    assert "neighbours   448 <= |x| <= 480" in out
    assert "a tie; chose 448" in out


def test_explain_out_of_range_speaks_in_the_target_terms(capsys) -> None:
    status, out, _ = run(capsys, "explain", "1e300", "--to", "FLOAT8E8M0")
    assert status == 0
    assert out.splitlines()[1] == "result       FLOAT8E8M0 2^127 (0xFE)"
    assert "R6 x > 2^127" in out.splitlines()[2]  # range judged on x itself (R6)
    assert "2^-127 to 2^127" in out
    assert "neighbours" not in out and "2^996" not in out and "2^997" not in out
    assert widest(out) <= 80
    status, out, _ = run(capsys, "explain", "0x7E", "--from", "FLOAT8E4M3FN", "--to", "FLOAT4E2M1")
    assert status == 0
    assert out.splitlines()[1] == "result       FLOAT4E2M1 6 (0x7)"
    assert out.splitlines()[2].startswith("rule         R5 ")
    assert "384" not in out and "tie" not in out and "-6 to 6" in out


def test_saturate_and_round_mode_on_targets_that_ignore_them(capsys) -> None:
    """ONNX accepts and ignores them: the result is unchanged, and a note says so."""
    plain = run(capsys, "cast", "300", "--to", "INT8")
    status, out, err = run(capsys, "cast", "300", "--to", "INT8", "--no-saturate")
    assert status == 0 and out == plain[1]
    assert "saturate has no effect on INT8" in err and len(err.splitlines()) == 1
    status, out, err = run(capsys, "cast", "1.3", "--to", "FLOAT16", "--round-mode", "down")
    assert status == 0 and out == run(capsys, "cast", "1.3", "--to", "FLOAT16")[1]
    assert "round_mode has no effect on FLOAT16" in err


def test_version(capsys) -> None:
    status, out, _ = run(capsys, "--version")
    assert status == 0 and out.strip() == f"castlike {castlike.__version__}"


def test_install_hints_name_the_constraints_file() -> None:
    hint = install_hint("torch")
    assert "pip install 'castlike[torch]'" in hint and "-c constraints.txt" in hint


#: Every subcommand with bad values: each must give one line on stderr and exit status 2.
BAD_ARGUMENTS = [
    [],
    ["nope"],
    ["cast"],
    ["cast", "1", "--to", "FLOAT9"],
    ["cast", "1", "--to", "99"],
    ["cast", "1", "--to", "0"],
    ["cast", "1", "--to", "COMPLEX64"],
    ["cast", "abc", "--to", "FLOAT"],
    ["cast", "abc", "--to", "INT8", "--no-saturate", "--round-mode", "down"],
    ["cast", "300", "--from", "INT8", "--to", "FLOAT"],
    ["cast", "1.5", "--from", "INT8", "--to", "FLOAT"],
    ["cast", "2", "--from", "BOOL", "--to", "FLOAT"],
    ["cast", "0xZZ", "--from", "FLOAT8E4M3FN", "--to", "FLOAT"],
    ["cast", "0x1FF", "--from", "FLOAT8E4M3FN", "--to", "FLOAT"],
    ["cast", "abc", "--from", "STRING", "--to", "FLOAT"],
    ["cast", "1", "--to", "FLOAT8E4M3FN", "--opset", "13"],
    ["cast", "1", "--to", "FLOAT16", "--opset", "13", "--no-saturate"],
    ["cast", "1", "--to", "FLOAT8E8M0", "--opset", "23", "--round-mode", "down"],
    ["cast", "1", "--to", "FLOAT", "--opset", "99"],
    ["cast", "1", "--to", "FLOAT", "--opset", "0"],
    ["cast", "1", "--to", "FLOAT", "--opset", "x"],
    ["cast", "1", "--to", "FLOAT", "--profile", "nope"],
    ["cast", "1", "--to", "FLOAT8E8M0", "--round-mode", "sideways"],
    ["explain"],
    ["explain", "1", "2", "--to", "FLOAT"],
    ["explain", "1", "--to", "FLOAT9"],
    ["explain", "abc", "--to", "FLOAT"],
    ["explain", "abc", "--from", "STRING", "--to", "INT8"],
    ["explain", "1", "--to", "FLOAT", "--opset", "99"],
    ["types", "--bogus"],
    ["matrix", "--opset", "99"],
    ["matrix", "--opset", "0"],
    ["matrix", "--opset", "x"],
    ["matrix", "--op", "Nope"],
    ["matrix", "--op", "CastLike", "--opset", "3"],
    ["parity", "--source", "NOPE"],
    ["parity", "--target", "STRING"],
    ["parity", "--backend", "nope"],
    ["parity", "--random", "-1"],
    ["parity", "--jobs", "0"],
    ["parity", "--seed", "x"],
    ["parity", "--json", "/nonexistent-folder/p.json"],
    ["parity", "--backend", "numpy", "--device", "cuda"],
    ["conformance", "--backend", "nope"],
    ["conformance", "--data-profile", "nope"],
    ["conformance", "--no-installed"],
    ["conformance", "--json", "/nonexistent-folder/c.json"],
    ["compare", "--library", "nope"],
    ["compare", "--source", "NOPE"],
    ["compare", "--target", "STRING"],
    ["compare", "--json", "/nonexistent-folder/c.json"],
]


@pytest.mark.parametrize("argv", BAD_ARGUMENTS, ids=lambda a: " ".join(a) or "(none)")
def test_bad_arguments_are_one_line_with_status_2(capsys, tmp_path, argv) -> None:
    # An output path inside a regular file cannot be created, as root or not.
    (tmp_path / "file").write_text("")
    argv = [a.replace("/nonexistent-folder", str(tmp_path / "file")) for a in argv]
    status, _out, err = run(capsys, *argv)
    assert status == 2
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("castlike")


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["cast", "1", "--to", "FLOAT9"], "unknown ONNX type name 'FLOAT9'"),
        (["cast", "abc", "--to", "FLOAT"], "'abc' is not a number"),
        (["cast", "300", "--from", "INT8", "--to", "FLOAT"], "outside INT8"),
        (["cast", "1", "--to", "FLOAT8E4M3FN", "--opset", "13"], "does not allow FLOAT8E4M3FN"),
        (["cast", "1", "--to", "FLOAT16", "--opset", "13", "--no-saturate"], "no 'saturate'"),
        (["cast", "abc", "--from", "STRING", "--to", "INT32"], "'abc'"),
        (["matrix", "--op", "CastLike", "--opset", "3"], "CastLike does not exist in opset 3"),
        (["matrix", "--opset", "99"], "opset 99 is outside"),
    ],
)
def test_error_messages(capsys, argv, text) -> None:
    status, _out, err = run(capsys, *argv)
    assert status == 2 and text in err


def test_types_fit_80_columns_and_keep_every_value(capsys) -> None:
    status, out, _ = run(capsys, "types")
    assert status == 0 and widest(out) <= 80
    assert "…" not in out
    assert "FLOAT8E4M3FNUZ" in out and "0x7FF8000000000000" in out
    assert "18446744073709551615" in out and "-9223372036854775808" in out
    assert ".md" not in out  # the rules live in the docs, not in a file outside them


def test_matrix_fits_80_columns(capsys) -> None:
    status, out, _ = run(capsys, "matrix", "--op", "CastLike", "--opset", "19")
    assert status == 0 and widest(out) <= 80
    lines = out.splitlines()
    assert lines[0].startswith("CastLike-19 at opset 19")
    row = next(line for line in lines if line.startswith("17 FLOAT8E4M3FN"))
    assert row.split()[2:] == ["x"] * 18 + ["."] * 8  # 18 types at CastLike-19
    status, out, _ = run(capsys, "matrix", "--opset", "13")
    assert status == 0 and "Cast-13" in out and "14 types" in out


def test_plain_table_keeps_every_value() -> None:
    text = plain_table(["a", "long header"], [["x" * 30, "1"], ["y", "22"]], right=frozenset({1}))
    lines = text.splitlines()
    assert lines[2] == "x" * 30 + "            1"
    assert lines[3].endswith("22") and "x" * 30 in text


def test_python_dash_m() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "castlike", "cast", "448", "--to", "FLOAT8E4M3FN"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and "(0x7E)" in proc.stdout


def test_conformance_summary_says_spec_differences_are_inside_pass() -> None:
    from castlike.cli.conformance import summary_rows
    from castlike.conformance import Comparison, ConformanceCase, Outcome, Report, Status
    from castlike.spec.rules import Profile

    def outcome(name: str, status: Status, spec_count: int) -> Outcome:
        case = ConformanceCase(name, "onnx 1.23.2", Profile.REFERENCE_ML_DTYPES_0_7, None)
        return Outcome(case, "numpy", status, spec_run=Comparison(count=spec_count))

    report = Report(
        ["numpy"],
        [
            outcome("a", Status.PASS, 0),
            outcome("b", Status.PASS, 3),
            outcome("c", Status.NOT_REPRESENTABLE, 0),
        ],
        [],
    )
    headers, rows, legend = summary_rows(report)
    assert headers == ["data (profile)", "backend", "pass", "of which spec≠", "FAIL", "n/r"]
    assert rows == [["onnx 1.23.2 (reference:ml_dtypes-0.7)", "numpy", "2", "1", "0", "1"]]
    assert any("of which spec≠: passing cases" in line for line in legend)
    # "pending" appears only when a case is pending, and is then explained.
    report.outcomes.append(outcome("d", Status.PENDING, 0))
    headers, rows, legend = summary_rows(report)
    assert headers[-1] == "pending" and rows[0][-1] == "1"
    assert any(line.startswith("pending:") for line in legend)


def test_plain_output_in_pipes(tmp_path) -> None:
    """Through a pipe the tables are plain text: no box drawing, no ellipsis, no colour."""
    proc = subprocess.run(
        [sys.executable, "-m", "castlike", "matrix", "--opset", "25"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "\x1b[" not in proc.stdout and "…" not in proc.stdout
    assert widest(proc.stdout) <= 80
    assert (
        proc.stdout.splitlines()[0]
        == "Cast-25 at opset 25: source (rows) -> target (columns, by code)"
    )


def test_parity_table_fits_80_columns_with_every_builtin_backend() -> None:
    from castlike.backends._registry import BUILTIN_BACKENDS
    from castlike.cli.parity import matrix_rows
    from castlike.parity import Cell, CellStatus, ModeMismatch, ParityReport
    from castlike.testing import numeric_types

    types = numeric_types()
    backends = [info.name for info in BUILTIN_BACKENDS]
    cells = {}
    for i, s in enumerate(types):
        for j, t in enumerate(types):
            for b in backends:
                if (i + j) % 7 == 0:
                    cell = Cell(CellStatus.MISMATCH, mismatches=[ModeMismatch("m", 123456, [], "")])
                elif (i * j) % 5 == 1:
                    cell = Cell(CellStatus.NOT_REPRESENTABLE)
                else:
                    cell = Cell(CellStatus.PASS)
                cells[(s.name, t.name, b)] = cell
    report = ParityReport(backends, types, types, cells, True, 0, 0)
    headers, rows, legend = matrix_rows(report, full=False)
    text = plain_table(headers, rows, legend=legend)
    assert widest(text) <= 80
    assert rows[0][0] == "FLOAT" and "✗" in rows[0][1] and "✓" in rows[0][1]
    headers, rows, legend = matrix_rows(report, full=True)
    assert widest(plain_table(headers, rows, legend=legend)) <= 80
    assert "strict: the array-api-strict backend" in legend  # a long name's short header
    assert "✗ 123456" in {c for r in rows for c in r[1:]}


def test_explain_verbose_prints_the_route(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "explain", "1e10", "--to", "INT8", "--from", "FLOAT", "-v")
    assert status == 0
    assert "route        truncation with saturation" in out
    assert "saturation: (-128.0, 127.0, None)" in out
    assert "kernel       float_to_int:f32:i8" in out
    # A route the kernels leave to the pure engine, with the profile's zeroes.
    profile = "reference:ml_dtypes-0.7"
    _, out, _ = run(capsys, "explain", "3.7", "--to", "INT4", "--profile", profile, "-v")
    assert "kept: -9 < x < 8, else 0" in out and "the pure NumPy engine" in out
    # R3's NaN policy: the pattern's payload, quieted.
    _, out, _ = run(capsys, "explain", "0x7C01", "--from", "FLOAT16", "--to", "FLOAT", "-v")
    assert "(0x7FC02000)" in out and "NaN policy" in out
