"""The ``castlike`` command (also ``python -m castlike``).

Each subcommand lives in its own module with ``register(subparsers)``, which adds its parser
and sets ``func``.  Bad arguments give a one-line error and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

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
    """argparse, but errors are one line (``castlike: error: ...``) and exit status 2."""

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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.func(args)
    except CastError as exc:
        print(f"castlike {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status


def main_exit() -> None:
    """Console-script entry point."""
    sys.exit(main())
