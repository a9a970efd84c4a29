"""Pages and pictures generated from castlike itself when the docs are built.

Nothing here is pasted: the type matrix comes from :mod:`castlike.spec.opsets`, the value
tables from :mod:`castlike.spec.types` and the oracle's decoder, the command-line reference
from the argument parser, the plots from :func:`castlike.cast`, and the "where others differ"
page from ``castlike compare`` (its stored JSON, ``docs/_data/compare.json``, or a fresh run
when ``CASTLIKE_DOCS_COMPARE=1``).  Everything is written to ``docs/_generated/`` (git-ignored)
when the builder starts, so that a change of a rule changes the pages.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
OUT = HERE / "_generated"
COMPARE_JSON = HERE / "_data" / "compare.json"


def _write(name: str, text: str) -> None:
    OUT.mkdir(exist_ok=True)
    path = OUT / name
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")  # unchanged files keep Sphinx's cache valid


def _grid(headers: list[str], rows: list[list[str]], *, css: str = "") -> str:
    """A list-table: robust to any cell width, and furo scrolls it when it is wide.

    ``css``: classes of ``_static/castlike.css`` (``compact`` small print, ``values`` no
    wrapping inside a cell).
    """
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: auto"]
    if css:
        lines.append(f"   :class: {css}")
    lines.append("")
    for row in [headers, *rows]:
        lines.append(f"   * - {row[0] or ' '}")
        lines.extend(f"     - {cell or ' '}" for cell in row[1:])
    return "\n".join(lines) + "\n"


# == the type matrix =============================================================================


def type_matrix() -> str:
    from castlike.spec.opsets import OPS, Op
    from castlike.spec.types import TYPES

    cast, like = OPS[Op.CAST], OPS[Op.CAST_LIKE]
    headers = ["code", "type", *(str(v.since) for v in cast), "CastLike"]
    rows = []
    for t in TYPES.values():
        first = next((v.since for v in like if t.onnx_type in v.types), None)
        rows.append(
            [
                str(t.code),
                t.name,
                *("✓" if t.onnx_type in v.types else "" for v in cast),
                f"from {first}" if first is not None else "",
            ]
        )
    added: dict[str, int] = {}
    for v in cast:
        for a in sorted(v.attributes):
            added.setdefault(a, v.since)
    attrs = ", ".join(f"``{a}`` from {since}" for a, since in added.items())
    intro = (
        "Which element types each since-version of Cast allows (the numbered columns; any "
        "allowed type casts to any other allowed type), and the first CastLike version that "
        "allows each, generated from :mod:`castlike.spec.opsets`.  CastLike-15 allows the "
        "types of Cast-13 and follows Cast's additions at 19, 21, 23, 24 and 25.  "
        f"Attributes besides ``to``: {attrs} (CastLike: the same).  "
        "``castlike matrix --opset N`` prints one version.\n\n"
    )
    return intro + _grid(headers, rows)


# == value tables ================================================================================


def _exact(q: Fraction) -> str:
    """An exact value, short: ``0.375``, or ``1.25·2^-14`` where the decimal is long."""
    if q == 0:
        return "0"
    text = repr(float(q)) if float(q) == q else str(q)
    if text.endswith(".0"):
        text = text[:-2]
    if len(text) <= 9:
        return text
    k = q.numerator.bit_length() - q.denominator.bit_length()
    k = k if Fraction(2) ** k <= q else k - 1
    m = q / Fraction(2) ** k
    mant = repr(float(m)).removesuffix(".0")
    power = f"2\\ :sup:`{k}`"
    return power if m == 1 else f"{mant}·{power}"


def value_table(name: str) -> str:
    from castlike.spec.reference import decode
    from castlike.spec.types import TYPES_BY_NAME

    t = TYPES_BY_NAME[name]
    fmt = t.fmt
    e_bits, m_bits = fmt.exponent_bits, fmt.mantissa_bits
    headers = ["e \\\\ m", *(f"{m:0{max(m_bits, 1)}b}" for m in range(1 << m_bits))]
    rows = []
    for e in range(1 << e_bits):
        cells = []
        for m in range(1 << m_bits):
            bits = (e << m_bits) | m
            v = decode(bits, t)
            cells.append(_exact(v.magnitude) if v.kind == "finite" else str(v))
        rows.append([f"{e:0{e_bits}b}", *cells])
    signed = (
        ""
        if fmt.sign_mask == 0
        else (
            f" The sign bit (0x{fmt.sign_mask:X}) gives the negatives"
            + ("" if fmt.has_negative_zero else "; 0x80 is the NaN, not -0")
            + "."
        )
    )
    text = (
        f"{name}\n{'~' * len(name)}\n\n"
        f"{e_bits} exponent bits, {m_bits} mantissa bits, bias {fmt.bias}; max "
        f"{_exact(fmt.max_value)}, smallest normal {_exact(fmt.min_normal)}, smallest "
        f"subnormal {_exact(fmt.min_subnormal)}.{signed} Rows (e): the exponent field; columns "
        "(m): the mantissa field; cells: the value of the positive pattern.\n\n"
    )
    return text + _grid(headers, rows, css="compact values")


def value_tables() -> str:
    names = [
        "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ",
        "FLOAT8E5M2",
        "FLOAT8E5M2FNUZ",
        "FLOAT4E2M1",
        "FLOAT6E2M3",
        "FLOAT6E3M2",
    ]
    intro = (
        "Every value of the small float types, decoded by the oracle "
        "(:func:`castlike.spec.reference.decode`).  FLOAT8E8M0 is the powers of two "
        "2\\ :sup:`-127` … 2\\ :sup:`127` (0x00 … 0xFE) and NaN (0xFF).\n\n"
    )
    return intro + "\n".join(value_table(n) for n in names)


def backend_table() -> str:
    """Which types each backend importable at build time holds."""
    import importlib

    from castlike.backends import adapter_named, backends
    from castlike.spec.types import TYPES

    names = []
    for info in backends():  # castlike's registry
        try:
            importlib.import_module(info.module)
            adapter_named(info.name)
        except Exception:  # not installed where the docs were built
            continue
        names.append(info.name)
    columns: dict[tuple[str, ...], list[str]] = {}
    for name in names:
        cells = []
        for t in TYPES.values():
            dtype = adapter_named(name).library_dtype(t)
            text = str(dtype) if dtype is not None else ""
            for prefix in ("torch.", "array_api_strict."):
                text = text.removeprefix(prefix)
            cells.append(f"``{text}``" if text else "**refused**")
        columns.setdefault(tuple(cells), []).append(name)  # equal columns merged
    rows = [[t.name, *(cells[i] for cells in columns)] for i, t in enumerate(TYPES.values())]
    note = (
        "The dtype each backend holds a type in (one element per byte for the sub-byte types), "
        f"for the backends installed where these docs were built ({', '.join(names)}); "
        "**refused** is an error naming what to do instead (R10); torch dtypes are "
        "``torch.<name>``, array-api-strict's ``array_api_strict.<name>``.  JAX holds the "
        "64-bit types only with ``jax_enable_x64``"
        f" ({'on' if os.environ.get('JAX_ENABLE_X64') else 'off'} for this build).\n\n"
    )
    return note + _grid(["type", *(", ".join(n) for n in columns.values())], rows)


#: (knob of ProfileRules, what it changes, source, value, target, options): one cast each.
PROFILE_EXAMPLES = [
    ("wide_sources_via_float", "DOUBLE", "0x3FF1000000100000", "FLOAT8E4M3FN", {}),
    ("sub_byte_rounding", "FLOAT", "2.7", "INT4", {}),
    ("sub_byte_range", "FLOAT", "9", "INT4", {}),
    ("float8e5m2_nan", "FLOAT", "nan", "FLOAT8E5M2", {}),
    ("finite_only_nan", "FLOAT", "nan", "FLOAT4E2M1", {}),
    ("e8m0", "FLOAT", "0", "FLOAT8E8M0", {"saturate": False}),
    ("fnuz_inf", "FLOAT", "inf", "FLOAT8E4M3FNUZ", {"opset": 23}),
    ("bfloat16", "FLOAT", "0x3F80C000", "BFLOAT16", {}),
]


def profile_table() -> str:
    """One cast per knob of the profiles, with the bits each profile gives."""
    from dataclasses import fields

    import numpy as np

    import castlike
    from castlike.backends.numpy import ADAPTER as NUMPY
    from castlike.cli._common import parse_value, show_bits, show_in
    from castlike.spec.reference import decode
    from castlike.spec.rules import PROFILES, Profile
    from castlike.spec.types import TYPES_BY_NAME

    knobs = {f.name for f in fields(next(iter(PROFILES.values())))}
    rows = []
    for knob, src_name, text, dst_name, options in PROFILE_EXAMPLES:
        assert knob in knobs, knob  # a renamed knob must not leave a stale row
        source, target = TYPES_BY_NAME[src_name], TYPES_BY_NAME[dst_name]
        bits_in = parse_value(text, source)
        x = NUMPY.from_bits(np.array([bits_in], f"uint{source.storage_bits}"), source)
        cells = []
        for profile in Profile:
            y = castlike.cast(x, dst_name, profile=profile.value, **options)
            b = int(NUMPY.bits(y, target)[0])
            cells.append(f"{show_bits(b, target)} ({show_in(decode(b, target), target)})")
        where = "".join(f", {k}={int(v)}" for k, v in options.items())
        where = f" ({where[2:]})" if where else ""
        held = show_in(decode(bits_in, source), source)
        rows.append([f"``{knob}``: {src_name} {held} → {dst_name}{where}", *cells])
    intro = (
        "One cast for each rule in which the profiles differ (the fields of "
        ":class:`castlike.spec.rules.ProfileRules`), computed with :func:`castlike.cast` "
        "when these pages are built; :doc:`profiles` explains each.\n\n"
    )
    return intro + _grid(["rule (knob): cast", *(p.value for p in Profile)], rows, css="compact")


# == the command-line reference ==================================================================


def cli_reference() -> str:
    os.environ["COLUMNS"] = "88"  # argparse wraps to this; the same on every machine
    from castlike.cli import build_parser

    parser = build_parser()
    parts = ["``castlike --help``:\n\n.. code-block:: text\n"]
    parts.append("\n".join("   " + line for line in parser.format_help().splitlines()))
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():  # type: ignore[union-attr]
        title = f"castlike {name}"
        parts.append(f"\n\n{title}\n{'~' * len(title)}\n\n.. code-block:: text\n")
        parts.append("\n".join("   " + line for line in p.format_help().splitlines()))
    return "\n".join(parts) + "\n"


#: Commands whose output the command-line page shows, run when the docs are built.
CLI_EXAMPLES = {
    "cast": "cast 0.1 448 500 1e6 nan inf -0.0 --to FLOAT8E4M3FN",
    "cast_string": "cast 100.5 -2.7 1e3 --from STRING --to 6",
    "explain": "explain 0.1 --to FLOAT8E4M3FN",
    "explain_tie": "explain 464 --to FLOAT8E4M3FN --no-saturate",
    "explain_range": "explain 1e300 --to FLOAT8E8M0",
    "explain_float4": "explain 0x7E --from FLOAT8E4M3FN --to FLOAT4E2M1",
    "matrix": "matrix --op CastLike --opset 19",
    "types": "types",
}


def cli_examples() -> None:
    """``_generated/cli_<name>.rst``: each example command and what it prints."""
    import contextlib
    import io
    import shlex

    from castlike.cli import main

    for name, command in CLI_EXAMPLES.items():
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(shlex.split(command))
        if status != 0:
            raise RuntimeError(f"castlike {command} failed: {err.getvalue()}")
        body = "\n".join(f"   {line}".rstrip() for line in out.getvalue().splitlines())
        _write(f"cli_{name}.rst", f".. code-block:: console\n\n   $ castlike {command}\n{body}\n")


# == where others differ =========================================================================


def _compare_data() -> dict[str, Any] | None:
    if os.environ.get("CASTLIKE_DOCS_COMPARE") == "1":
        from castlike.compare import compare

        return compare().to_json()
    if COMPARE_JSON.exists():
        data: dict[str, Any] = json.loads(COMPARE_JSON.read_text(encoding="utf-8"))
        return data
    return None


def differences() -> str:
    from castlike.compare import CAUSES

    data = _compare_data()
    if data is None:
        return "No stored ``castlike compare`` report was found when these docs were built.\n"
    libs = data["libraries"]
    lines = [
        "Measured with castlike " + data.get("castlike", "?") + " and:\n",
        *(f"* **{n}**: {w}" for n, w in libs.items()),
        "",
    ]
    counts = data["counts"]
    rows = []
    for name in libs:
        checked = data["checked"].get(name, {})
        rows.append(
            [
                name,
                str(checked.get("pairs", 0)),
                str(checked.get("unsupported_pairs", 0)),
                *(str(counts[name][c]) for c in CAUSES),
            ]
        )
    from castlike.cli.compare import SHORT

    lines.append(
        "Differing elements per cause, summed over every pair and mode (pairs: the (source, "
        "target) pairs the library casts; n/a: those it cannot; "
        + ", ".join(f"{SHORT[c]}: {c}" for c in CAUSES)
        + "):\n"
    )
    lines.append(_grid(["library", "pairs", "n/a", *(SHORT[c] for c in CAUSES)], rows))
    from castlike.compare import summarize

    if not data.get("summarized"):
        data = summarize(data)
    best = {(d["library"], d["cause"]): d for d in data["differences"]}
    for name in libs:
        keys = [(name, c) for c in CAUSES if (name, c) in best]
        if not keys:
            continue
        title = f"{name}"
        lines.append(f"{title}\n{'-' * len(title)}\n")
        for key in keys:
            d = best[key]
            mode = f" ({d['mode']})" if d["mode"] != "-" else ""
            ex = d["example"]
            lines.append(
                f"**{d['cause']}**: {d['entries']} (pair, mode) entries; the largest is "
                f"{d['source']} → {d['target']}{mode}, {d['count']} elements.  For example "
                f"{ex['input']} gives {ex['library']} where castlike gives {ex['castlike']}:\n"
            )
            lines.append(f".. code-block:: python\n\n   {ex['repro']}\n")
    return "\n".join(lines) + "\n"


# == plots =======================================================================================


def plots() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import castlike

    OUT.mkdir(exist_ok=True)
    plt.rcParams.update({"figure.dpi": 110, "font.size": 10})

    # R6: the three FLOAT8E8M0 round modes as step functions.
    x = np.linspace(0.3, 9.0, 2000)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.plot(x, x, color="0.75", lw=1, label="x")
    for mode, style in (("up", "-"), ("nearest", "--"), ("down", ":")):
        y = castlike.cast(x, "FLOAT8E8M0", round_mode=mode).astype(np.float64)
        ax.step(x, y, style, where="post", lw=1.8, label=f'round_mode="{mode}"')
    ax.set_xlabel("x")
    ax.set_ylabel("FLOAT8E8M0 result")
    ax.set_yscale("log", base=2)
    ax.set_title("R6: FLOAT8E8M0 rounds to a power of two")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(OUT / "e8m0_round_modes.png")
    plt.close(fig)

    # R7: INT4 rounds half to even, then wraps (the reference profile truncates).
    x = np.linspace(-20, 20, 4001)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.plot(x, x, color="0.75", lw=1, label="x")
    spec = castlike.cast(x, "INT4").astype(np.int8)
    ref = castlike.cast(x, "INT4", profile="reference:ml_dtypes-0.6").astype(np.int8)
    ref7 = castlike.cast(x, "INT4", profile="reference:ml_dtypes-0.7").astype(np.int8)
    ax.step(x, spec, where="mid", lw=1.8, label="spec: round half to even, wrap")
    ax.step(x, ref, "--", where="mid", lw=1.2, label="reference, ml_dtypes 0.5-0.6: truncate, wrap")
    ax.step(x, ref7, ":", where="mid", lw=1.2, label="reference, ml_dtypes 0.7: beyond range -> 0")
    ax.set_ylim(-10, 10)
    ax.set_xlabel("x (DOUBLE)")
    ax.set_ylabel("INT4 result")
    ax.set_title("R7: float → INT4 keeps the low 4 bits (9 → -7)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "int4_wrap.png")
    plt.close(fig)

    # R4: float8 saturation on and off.
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    for ax, name, top in ((axes[0], "FLOAT8E4M3FN", 600.0), (axes[1], "FLOAT8E5M2", 80000.0)):
        x = np.linspace(0, top, 3001)
        on = castlike.cast(x, name).astype(np.float64)
        off = castlike.cast(x, name, saturate=False).astype(np.float64)
        ax.plot(x, on, lw=2, label="saturate=1")
        finite = np.isfinite(off)
        ax.plot(
            np.where(finite, x, np.nan),
            np.where(finite, off, np.nan),
            "--",
            lw=1.5,
            label="saturate=0",
        )
        first = x[~finite][0] if (~finite).any() else None
        if first is not None:
            label = "NaN" if name == "FLOAT8E4M3FN" else "Inf"
            ax.axvline(first, color="C3", lw=1, ls=":")
            ax.text(first, on.max() * 0.5, f" {label} from {first:g}", color="C3", fontsize=8)
        ax.set_title(name)
        ax.set_xlabel("x")
        ax.legend(loc="upper left", fontsize=8)
    axes[0].set_ylabel("result")
    fig.suptitle("R4: out of range, saturate=1 gives ±max; saturate=0 NaN or Inf")
    fig.tight_layout()
    fig.savefig(OUT / "float8_saturation.png")
    plt.close(fig)


def array_api_types() -> str:
    """What the generic Array-API backend holds and refuses, from its code."""
    import array_api_strict

    from castlike.backends.array_api import STANDARD_TYPES, ArrayApiAdapter
    from castlike.spec.types import TYPES, OnnxType

    adapter = ArrayApiAdapter(array_api_strict, name="array-api-strict")
    held = [t for t in TYPES.values() if adapter.library_dtype(t) is not None]
    standard = [TYPES[t].name for t in STANDARD_TYPES]
    rows = [
        ["held (on array-api-strict)", ", ".join(t.name for t in held)],
        ["held where the namespace has ``float16``", "FLOAT16"],
        [
            "refused (R10)",
            ", ".join(t.name for t in TYPES.values() if t.name not in standard),
        ],
    ]
    pairs = len(held) ** 2
    note = (
        f"From :data:`castlike.backends.array_api.STANDARD_TYPES`: on array-api-strict "
        f"(no float16) every pair of its {len(held)} types is cast ({pairs} pairs, every mode), "
        "and no pair of held types is refused.  A pair with a refused type raises "
        ":class:`~castlike.BackendTypeError` naming the library and the alternative, e.g. "
        f"*{adapter.name} cannot hold BFLOAT16; "
        f"{adapter.cannot_hold_hint(TYPES[OnnxType.BFLOAT16])}*\n\n"
    )
    return note + _grid(["", "types"], rows)


def packed_layouts() -> str:
    """Where each element's bits lie in the packed bytes, per layout of
    :data:`castlike.spec.packing.LAYOUTS` (element ``i``'s bit ``j`` is bit ``i * bits + j``
    of the row's little-endian stream), with the types of each layout."""
    from castlike.spec.packing import LAYOUTS

    by_layout: dict[Any, list[str]] = {}
    for code, layout in LAYOUTS.items():
        by_layout.setdefault(layout, []).append(code.name)
    parts = []
    for layout, names in by_layout.items():
        cells: dict[tuple[int, int], str] = {}
        for i in range(layout.group):
            for j in range(layout.bits):
                position = i * layout.bits + j
                cells[(position // 8, position % 8)] = f"e{i}[{j}]"
        rows = [
            [f"byte {b}", *(cells[(b, bit)] for bit in range(7, -1, -1))]
            for b in range(layout.group_bytes)
        ]
        title = (
            f"{layout.bits}-bit: {', '.join(names)} ({layout.group} elements in "
            f"{layout.group_bytes} byte{'s' if layout.group_bytes > 1 else ''})"
        )
        parts.append(
            f"{title}\n{'~' * len(title)}\n\n"
            + _grid(["", *(f"bit {bit}" for bit in range(7, -1, -1))], rows, css="compact values")
        )
    return "\n".join(parts)


def generate(app: Any = None) -> None:
    _write("type_matrix.rst", type_matrix())
    _write("value_tables.rst", value_tables())
    _write("backend_table.rst", backend_table())
    _write("array_api_types.rst", array_api_types())
    _write("profile_table.rst", profile_table())
    _write("packed_layouts.rst", packed_layouts())
    _write("cli_reference.rst", cli_reference())
    cli_examples()
    _write("differences.rst", differences())
    plots()


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "version": "1"}
