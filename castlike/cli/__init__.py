"""The ``castlike`` command (also ``python -m castlike``).

Each subcommand lives in its own module with ``register(subparsers)``, which adds its parser
and sets ``func``.  Bad arguments give a one-line error and exit status 2, never a traceback;
so does an argument that is not UTF-8 text.  Output that cannot be written (a closed standard
output, a pipe closed early as by ``| head -1``, a full disk, an encoding that lacks a
character) gives a one-line error and exit status 1: output is never lost silently.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
import typing
from collections.abc import Sequence
from typing import Any, TextIO

from ..errors import CastError

__all__ = ["main"]

#: Subcommand modules, in the order ``castlike --help`` lists them.
SUBCOMMANDS = (
    "cast",
    "explain",
    "types",
    "matrix",
    "parity",
    "conformance",
    "compare",
    "info",
)


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (``castlike: error: ...``) and exit status 2, and
    every negative number of R9's grammar is a value, not an option: argparse's own test
    takes ``-1e-3``, ``-5.`` and ``-inf`` for options (no option of castlike looks like one)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(
            r"-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|-(inf|infinity|nan)$", re.IGNORECASE
        )

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="castlike",
        description="Cast values exactly as ONNX Cast/CastLike define, and check backends.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"castlike {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"castlike.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"castlike.cli.{name}":
                continue  # a subcommand not written yet
            raise
        module.register(sub)
    return parser


class OutputError(Exception):
    """Standard output cannot be written; the message says why."""


class _CheckedOutput:
    """Standard output, whose write errors become :class:`OutputError` (so that :func:`main`
    tells them from other errors).  Everything else is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def _failed(self, exc: OSError | UnicodeEncodeError) -> OutputError:
        if isinstance(exc, UnicodeEncodeError):
            bad = exc.object[exc.start : exc.end]
            return OutputError(
                f"the output's encoding ({exc.encoding}) has no {bad!a}; set PYTHONIOENCODING=utf-8"
            )
        return OutputError(exc.strerror or str(exc))

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, UnicodeEncodeError) as exc:
            raise self._failed(exc) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise self._failed(exc) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _error(command: str, message: str) -> None:
    """One line on stderr (which may itself be gone: then nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        print(f"{command}: error: {message}", file=sys.stderr, flush=True)


def _not_utf8(arguments: Sequence[str]) -> str | None:
    """The first argument that is not UTF-8 text, as its bytes, or None.

    Python reads such an argument with lone surrogates in place of the bytes it cannot
    decode; every subcommand reads its arguments as text, which they are not.
    """
    for argument in arguments:
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            try:
                return repr(os.fsencode(argument))
            except UnicodeEncodeError:
                return ascii(argument)
    return None


def _discard_pending_output(stream: TextIO) -> None:
    """Point the output's file descriptor at the null device, so that the interpreter's last
    flush of what is still buffered does not fail a second time, with a traceback."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return  # not a file (a test's capture): nothing flushes it at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _run(args: argparse.Namespace, command: str) -> int:
    """Run the parsed command; the exit status."""
    try:
        status: int = args.func(args)
    except CastError as exc:
        _error(command, str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    stream = sys.stdout
    if stream is None:  # the interpreter started with file descriptor 1 closed
        _error("castlike", "standard output is closed; redirect it (>/dev/null) to discard it")
        return 1
    bad = _not_utf8(arguments)
    if bad is not None:
        _error("castlike", f"the argument {bad} is not UTF-8 text, as castlike reads them")
        return 2
    command = "castlike"
    # typing.cast: "cast" in this package is the subcommand module.
    sys.stdout = typing.cast(TextIO, _CheckedOutput(stream))
    try:
        try:
            args = build_parser().parse_args(arguments)
            command = f"castlike {args.command}"
            status = _run(args, command)
        finally:  # also after --help (SystemExit): what is buffered must reach its place
            sys.stdout.flush()
    except OutputError as exc:
        _discard_pending_output(stream)
        _error(command, f"cannot write the output: {exc}")
        return 1
    finally:
        sys.stdout = stream
    return status


def main_exit() -> None:
    """Console-script entry point."""
    sys.exit(main())
