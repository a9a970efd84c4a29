"""Pictures of a :class:`~castlike.parity.ParityReport`: a colour matrix as HTML or PNG.

The matrix has one row per source type and one column per target type.  Each cell is split
into one stripe per backend (left to right in the report's backend order): green when every
check of the pair passed on that backend, red with the number of differing elements when any
did not (``!`` for an error), grey when the backend cannot hold the pair.  The PNG needs Pillow
(the ``cli`` extra); the HTML is one self-contained file.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from .parity import Cell, CellStatus, ParityReport

__all__ = ["COLOURS", "compact_count", "render_html", "render_png", "summary_line"]

#: (red, green, blue) of each verdict.
COLOURS = {
    CellStatus.PASS: (46, 160, 67),
    CellStatus.MISMATCH: (207, 34, 46),
    CellStatus.ERROR: (207, 34, 46),
    CellStatus.NOT_REPRESENTABLE: (205, 205, 205),
}
_LABELS = {
    CellStatus.PASS: "pass",
    CellStatus.MISMATCH: "mismatch (differing elements)",
    CellStatus.ERROR: "error (!)",
    CellStatus.NOT_REPRESENTABLE: "not representable",
}


def compact_count(n: int) -> str:
    """A count in at most four characters: 7, 512, 12k, 3M."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n // 1_000_000}M"


def _stripe_text(cell: Cell) -> str:
    if cell.status is CellStatus.MISMATCH:
        return compact_count(cell.mismatch_count)
    if cell.status is CellStatus.ERROR:
        return "!"
    return ""


def _tooltip(report: ParityReport, source: str, target: str, backend: str) -> str:
    cell = report.cells[(source, target, backend)]
    head = f"{source} -> {target} on {backend}: {cell.status.value}"
    if cell.status is CellStatus.PASS:
        return f"{head} ({cell.checks} modes x {cell.elements} inputs)"
    if cell.status is CellStatus.MISMATCH:
        return head + "\n" + "\n".join(m.text for m in cell.mismatches[:3])
    return f"{head}: {cell.reason}"


def summary_line(report: ParityReport) -> str:
    """One line: inputs, backends and the verdict."""
    inputs = "exhaustive" if report.exhaustive else f"sampled (seed {report.seed})"
    failed = len(report.failed)
    verdict = "no mismatch" if not failed else f"{failed} failing (pair, backend) cells"
    return (
        f"castlike parity: {', '.join(report.backends)} vs the oracle; {inputs} inputs, "
        f"{report.n_random} random per wide source; {verdict}"
    )


def render_html(report: ParityReport, path: Path) -> None:
    """Write the colour matrix (with tooltips and the list of mismatches) as one HTML file."""

    def rgb(status: CellStatus) -> str:
        return "rgb({},{},{})".format(*COLOURS[status])

    rows = []
    header = "".join(
        f'<th class="col"><div>{html.escape(t.name)}</div></th>' for t in report.targets
    )
    rows.append(f'<tr><th class="corner">source \\ target</th>{header}</tr>')
    for s in report.sources:
        cells = []
        for t in report.targets:
            stripes = []
            for b in report.backends:
                cell = report.cells[(s.name, t.name, b)]
                tip = html.escape(_tooltip(report, s.name, t.name, b))
                stripes.append(
                    f'<span style="background:{rgb(cell.status)}" title="{tip}">'
                    f"{html.escape(_stripe_text(cell))}</span>"
                )
            cells.append(f'<td><div class="cell">{"".join(stripes)}</div></td>')
        rows.append(f'<tr><th class="row">{html.escape(s.name)}</th>{"".join(cells)}</tr>')
    legend = " ".join(
        f'<span class="swatch" style="background:{rgb(status)}"></span> {label}'
        for status, label in _LABELS.items()
        if status is not CellStatus.ERROR
    )
    mismatches: list[str] = []
    for (source, target, backend), cell in report.cells.items():
        if cell.status is CellStatus.MISMATCH:
            mismatches.extend(f"<pre>{html.escape(m.text)}</pre>" for m in cell.mismatches)
        elif cell.status is CellStatus.ERROR:
            text = f"{source} -> {target} on {backend}: {cell.reason}"
            mismatches.append(f"<pre>{html.escape(text)}</pre>")
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in report.notes)
    detail = "".join(mismatches) or "<p>No mismatch.</p>"
    document = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>castlike parity</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; }}
th.row {{ text-align: right; padding-right: .5em; font-weight: normal; white-space: nowrap; }}
th.col {{ height: 9em; vertical-align: bottom; padding: 0; }}
th.col div {{ writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal;
  white-space: nowrap; margin: 0 auto; }}
td {{ padding: 1px; }}
.cell {{ display: flex; }}
.cell span {{ display: inline-block; width: 1.6em; height: 1.5em; font-size: 70%; color: white;
  text-align: center; line-height: 1.5em; margin-right: 1px; }}
.swatch {{ display: inline-block; width: 1em; height: 1em; vertical-align: middle; }}
</style></head><body>
<h1>castlike parity</h1>
<p>{html.escape(summary_line(report))}</p>
<p>Rows: source type; columns: target type; each cell has one stripe per backend, left to
right: <b>{html.escape(", ".join(report.backends))}</b>. Hover a stripe for details.</p>
<p>{legend}</p>
{notes}
<table>{"".join(rows)}</table>
<h2>Mismatches</h2>
{detail}
</body></html>
"""
    Path(path).write_text(document, encoding="utf-8")


def _font(size: int) -> Any:
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError, ImportError):  # Pillow without FreeType: the bitmap font
        return ImageFont.load_default()


def render_png(report: ParityReport, path: Path) -> None:
    """Draw the colour matrix as a PNG (needs Pillow, the ``cli`` extra)."""
    try:
        from PIL import Image, ImageDraw
    except ImportError as exc:
        raise ImportError(
            "--png needs Pillow: pip install 'castlike[cli]' (or pip install pillow)"
        ) from exc

    font, small, title_font = _font(13), _font(10), _font(16)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))

    def text_size(text: str, f: Any) -> tuple[int, int]:
        left, top, right, bottom = probe.textbbox((0, 0), text, font=f)
        return int(right - left), int(bottom - top)

    n_b = len(report.backends)
    stripe, cell_h, gap, pad = 20, 22, 3, 16
    cell_w = n_b * stripe
    label_w = max(text_size(s.name, font)[0] for s in report.sources) + 12
    col_label_h = max(text_size(t.name, font)[0] for t in report.targets) + 10
    lines = [
        summary_line(report),
        "Rows: source type.  Columns: target type.  Stripes in each cell, left to right: "
        + ", ".join(report.backends)
        + ".",
        *report.notes,
    ]
    line_h = text_size("Ag", font)[1] + 6
    title_h = text_size("Ag", title_font)[1] + 10
    grid_x = pad + label_w
    grid_y = pad + title_h + len(lines) * line_h + 8 + col_label_h
    legend_w = sum(40 + text_size(label, font)[0] for label in _LABELS.values())
    legend_w += text_size("each cell: = " + ", ".join(report.backends), font)[0] + cell_w + 20
    width = max(
        grid_x + len(report.targets) * (cell_w + gap) + pad,
        pad * 2 + max(text_size(line, font)[0] for line in lines),
        pad * 2 + legend_w,
    )
    legend_y = grid_y + len(report.sources) * (cell_h + gap) + 12
    height = legend_y + 2 * line_h + pad
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)

    draw.text((pad, pad), "castlike parity", fill="black", font=title_font)
    for i, line in enumerate(lines):
        draw.text((pad, pad + title_h + i * line_h), line, fill=(40, 40, 40), font=font)
    for j, t in enumerate(report.targets):
        w, h = text_size(t.name, font)
        tag = Image.new("RGBA", (w + 4, h + 6), (255, 255, 255, 0))
        ImageDraw.Draw(tag).text((2, 0), t.name, fill="black", font=font)
        rotated = tag.rotate(90, expand=True)
        x = grid_x + j * (cell_w + gap) + (cell_w - rotated.width) // 2
        image.paste(rotated, (x, grid_y - rotated.height - 4), rotated)
    for i, s in enumerate(report.sources):
        y = grid_y + i * (cell_h + gap)
        w, h = text_size(s.name, font)
        draw.text((grid_x - w - 8, y + (cell_h - h) // 2 - 2), s.name, fill="black", font=font)
        for j, t in enumerate(report.targets):
            x = grid_x + j * (cell_w + gap)
            for k, b in enumerate(report.backends):
                cell = report.cells[(s.name, t.name, b)]
                x0 = x + k * stripe
                draw.rectangle((x0, y, x0 + stripe - 2, y + cell_h - 1), fill=COLOURS[cell.status])
                count = _stripe_text(cell)
                if count:
                    tw, th = text_size(count, small)
                    draw.text(
                        (x0 + (stripe - 1 - tw) // 2, y + (cell_h - th) // 2 - 1),
                        count,
                        fill="white",
                        font=small,
                    )
    x = pad
    for status, label in _LABELS.items():
        if status is CellStatus.ERROR:
            continue
        draw.rectangle((x, legend_y, x + 14, legend_y + 14), fill=COLOURS[status])
        draw.text((x + 20, legend_y), label, fill="black", font=font)
        x += 20 + text_size(label, font)[0] + 24
    # A key cell: the stripe order, each stripe marked with its backend's initial.
    draw.text((x, legend_y), "each cell:", fill="black", font=font)
    x += text_size("each cell:", font)[0] + 8
    for k, b in enumerate(report.backends):
        x0 = x + k * stripe
        draw.rectangle((x0, legend_y - 4, x0 + stripe - 2, legend_y + cell_h - 5), outline="black")
        tw, th = text_size(b[0], small)
        draw.text((x0 + (stripe - 1 - tw) // 2, legend_y + 2), b[0], fill="black", font=small)
    x += n_b * stripe + 8
    draw.text((x, legend_y), "= " + ", ".join(report.backends), fill="black", font=font)
    image.save(path, format="PNG")
