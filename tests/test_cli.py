"""The ``castlike`` command: cast, explain, types, matrix, and its error handling."""

from __future__ import annotations

import subprocess
import sys

import pytest

from castlike.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def result_bits(out: str) -> list[str]:
    # Each value line ends with "(0x..)" of the result.
    return [line.rsplit("(", 1)[1].rstrip(")") for line in out.splitlines()[1:]]


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
        capsys, "cast", "1.0625000000000009", "--to", "FLOAT8E4M3FN", "--profile", "reference"
    )
    assert result_bits(out) == ["0x38"]


def test_explain_shows_the_reasoning(capsys) -> None:
    status, out, _ = run(capsys, "explain", "464", "--to", "FLOAT8E4M3FN", "--no-saturate")
    assert status == 0
    assert "neighbours   448 <= x <= 480" in out
    assert "tie; chose 448" in out
    assert "result       FLOAT8E4M3FN 448 (0x7E)" in out


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["cast", "1", "--to", "FLOAT9"], "unknown ONNX type name 'FLOAT9'"),
        (["cast", "abc", "--to", "FLOAT"], "'abc' is not a number"),
        (["cast", "300", "--from", "INT8", "--to", "FLOAT"], "outside INT8"),
        (["cast", "1", "--to", "FLOAT8E4M3FN", "--opset", "13"], "does not allow FLOAT8E4M3FN"),
        (["cast", "1", "--to", "FLOAT16", "--opset", "13", "--no-saturate"], "no 'saturate'"),
        (["matrix", "--op", "CastLike", "--opset", "3"], "CastLike does not exist in opset 3"),
    ],
)
def test_errors_are_one_line_with_status_2(capsys, argv, text) -> None:
    status, _out, err = run(capsys, *argv)
    assert status == 2
    assert text in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_argparse_errors_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["cast", "--to"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "castlike cast: error:" in err


def test_types_and_matrix(capsys) -> None:
    pytest.importorskip("rich", reason="the types/matrix tables need rich (castlike[cli])")
    status, out, _ = run(capsys, "types")
    assert status == 0 and "FLOAT8E4M3FNUZ" in out and "0x7F" in out
    status, out, _ = run(capsys, "matrix", "--opset", "13")
    assert status == 0 and "Cast-13" in out and "14 types allowed" in out


def test_python_dash_m() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "castlike", "cast", "448", "--to", "FLOAT8E4M3FN"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and "(0x7E)" in proc.stdout
