"""``castlike types``: the element types of the spec, their formats and backend dtypes.

Four tables of at most 80 columns: float formats and ranges, float special encodings,
integer ranges, and each imported backend's dtype (identical backend columns are merged).
"""

from __future__ import annotations

import argparse
import textwrap
from fractions import Fraction

from ..backends import loaded_adapters, moves_strings
from ..spec.reference import floor_log2
from ..spec.types import TYPES, Kind, Special
from ._common import short_number
from ._table import print_table


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "types",
        help="print the ONNX element types and their formats",
        description="Print the float formats (exponent/mantissa/bias, range, special "
        "encodings), the integer ranges, and the dtype of each imported backend.",
    )
    parser.add_argument(
        "--installed",
        action="store_true",
        help="import every installed backend library (torch, jax, dask) to show its dtypes",
    )
    parser.set_defaults(func=run)


def _value(q: Fraction) -> str:
    text = short_number(q)
    if len(text) <= 10:
        return text
    k = floor_log2(q)
    return f"2^{k}" if q == Fraction(2) ** k else f"{float(q):.4g}"


def float_rows() -> tuple[list[list[str]], list[list[str]]]:
    """(formats and ranges, special encodings) of every float type."""
    ranges, specials = [], []
    for t in TYPES.values():
        if t.kind is not Kind.FLOAT:
            continue
        fmt = t.fmt
        e8m0 = fmt.special is Special.E8M0
        ranges.append(
            [
                str(t.code),
                t.name,
                str(fmt.exponent_bits),
                str(fmt.mantissa_bits),
                str(fmt.bias),
                _value(fmt.max_value),
                _value(fmt.min_normal),
                "-" if e8m0 else _value(fmt.min_subnormal),
            ]
        )
        nan = fmt.nan_bits()
        specials.append(
            [
                str(t.code),
                t.name,
                "yes" if fmt.has_inf else "no",
                f"0x{nan:X}" if nan is not None else "none",
                "yes" if fmt.has_negative_zero else "no",
            ]
        )
    return ranges, specials


def integer_rows() -> list[list[str]]:
    rows = []
    for t in TYPES.values():
        if t.kind is Kind.FLOAT:
            continue
        if t.kind is Kind.STRING:
            rows.append([str(t.code), t.name, t.kind.value, "-", "-", "-"])
        else:
            rows.append(
                [str(t.code), t.name, t.kind.value, str(t.bits), str(t.int_min), str(t.int_max)]
            )
    return rows


def dtype_table() -> tuple[list[str], list[list[str]], list[str]]:
    """Headers, rows and legend of the backend dtypes; backends with equal columns merged."""
    columns: dict[tuple[str, ...], list[str]] = {}
    legend = []
    for adapter in loaded_adapters():
        if not moves_strings(adapter):
            # The generic Array-API backend: the standard's dtypes, under the standard's names;
            # a line of the legend rather than a column (the table then keeps to 80 columns).
            held = [t.name for t in TYPES.values() if adapter.library_dtype(t) is not None]
            text = (
                f"{adapter.name} (the generic Array-API backend) holds {', '.join(held)}: the "
                "standard's dtypes of those names"
            )
            legend += textwrap.wrap(text, 78, subsequent_indent="  ")
            continue
        texts = [str(adapter.library_dtype(t)) for t in TYPES.values()]
        held = [
            text
            for t, text in zip(TYPES.values(), texts, strict=True)
            if adapter.library_dtype(t) is not None
        ]
        # A library whose dtypes print with its module's name (torch.float32,
        # array_api_strict.float32): the name alone in the cells, the prefix in the legend.
        prefix = held[0].rpartition(".")[0] + "." if held and "." in held[0] else ""
        if not prefix or not all(text.startswith(prefix) for text in held):
            prefix = ""
        cells = [
            text.removeprefix(prefix) if adapter.library_dtype(t) is not None else "-"
            for t, text in zip(TYPES.values(), texts, strict=True)
        ]
        if prefix:
            legend.append(f"dtypes of {adapter.name}: {prefix}<name>")
        columns.setdefault(tuple(cells), []).append(adapter.name)
    headers = ["name", *(", ".join(names) for names in columns.values())]
    rows = [[t.name, *(cells[i] for cells in columns)] for i, t in enumerate(TYPES.values())]
    return headers, rows, legend


def run(args: argparse.Namespace) -> int:
    if args.installed:
        from ..parity import available_backends

        available_backends()  # imports each library that is installed
    ranges, specials = float_rows()
    print_table(
        ["code", "name", "E", "M", "bias", "max", "min normal", "min sub"],
        ranges,
        title="Float types (rules R1, R3-R6): exponent and mantissa bits, bias, range",
        legend=["min sub: the smallest subnormal (FLOAT8E8M0 has none)"],
        right=frozenset({0, 2, 3, 4, 5, 6, 7}),
    )
    print_table(
        ["code", "name", "Inf", "NaN bits", "-0"],
        specials,
        title="Float special values (rule R4 fixes the NaN encodings)",
        right=frozenset({0}),
    )
    print_table(
        ["code", "name", "kind", "bits", "min", "max"],
        integer_rows(),
        title="Integer and other types",
        right=frozenset({0, 3, 4, 5}),
    )
    headers, rows, legend = dtype_table()
    print_table(
        headers,
        rows,
        title="Backend dtypes ('-': the library cannot hold the type)",
        legend=[
            *legend,
            "Imported backends only: --installed imports every installed one.",
        ],
    )
    print("COMPLEX64 (14) and COMPLEX128 (15) are rejected:")
    print("casting from/to complex is not supported.")
    return 0
