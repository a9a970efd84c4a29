"""``castlike types``: the element types of the spec, their formats and backend dtypes."""

from __future__ import annotations

import argparse
from fractions import Fraction

from ..backends import loaded_adapters
from ..spec.reference import Exact
from ..spec.types import TYPES, Kind, Special
from ._common import require_rich, show


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "types",
        help="print the ONNX element types and their formats",
        description="Print the float formats (exponent/mantissa/bias, range, special "
        "encodings), the integer ranges, and the dtype of each imported backend.",
    )
    parser.set_defaults(func=run)


def _value(q: Fraction) -> str:
    text = show(Exact("finite", False, q))
    return text if len(text) <= 10 else f"{float(q):.4g}"


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    console = require_rich()
    floats = Table(title="Float types (RULES.md R1, R3-R6)", header_style="bold")
    for column in (
        "code",
        "name",
        "E",
        "M",
        "bias",
        "max",
        "min normal",
        "min subnormal",
        "Inf",
        "NaN",
        "-0",
    ):
        floats.add_column(
            column,
            justify="left" if column == "name" else "right",
            no_wrap=column in ("name", "NaN"),
        )
    ints = Table(title="Integer and other types", header_style="bold")
    for column in ("code", "name", "kind", "bits", "min", "max"):
        ints.add_column(column, justify="right")
    for t in TYPES.values():
        if t.kind is Kind.FLOAT:
            fmt = t.fmt
            nan = fmt.nan_bits()
            floats.add_row(
                str(t.code),
                t.name,
                str(fmt.exponent_bits),
                str(fmt.mantissa_bits),
                str(fmt.bias),
                _value(fmt.max_value),
                _value(fmt.min_normal),
                _value(fmt.min_subnormal) if fmt.special is not Special.E8M0 else "-",
                "yes" if fmt.has_inf else "no",
                f"0x{nan:X}" if nan is not None else "none",
                "yes" if fmt.has_negative_zero else "no",
            )
        elif t.kind is Kind.STRING:
            ints.add_row(str(t.code), t.name, t.kind.value, "-", "-", "-")
        else:
            ints.add_row(
                str(t.code), t.name, t.kind.value, str(t.bits), str(t.int_min), str(t.int_max)
            )
    console.print(floats)
    console.print(ints)
    adapters = loaded_adapters()
    dtypes = Table(
        title="Backend dtypes ('-': the library cannot hold the type)", header_style="bold"
    )
    dtypes.add_column("name")
    for adapter in adapters:
        dtypes.add_column(adapter.name)
    for t in TYPES.values():
        cells = []
        for adapter in adapters:
            dtype = adapter.native_dtype(t)
            cells.append(str(dtype) if dtype is not None else "-")
        dtypes.add_row(t.name, *cells)
    console.print(dtypes)
    console.print(
        "COMPLEX64 (14) and COMPLEX128 (15) are rejected: casting from/to complex is not supported."
    )
    return 0
