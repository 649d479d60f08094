#!/usr/bin/env python3
"""Draws where devtensor stands against PyTorch, one screen: an SVG bar chart
of devtensor's time over PyTorch's (the `dt/PyTorch` column of
`benches/peers`) for every model row, one bar per saved run.

    python3 scripts/bench-chart.py docs/bench/*.txt > docs/bench/peers.svg

Each input is the output of one `devtensor-peers` run, saved as it printed
(`... > docs/bench/<host>-<isa>-<date>.txt`); its file name, without
`.txt`, labels its bars. A bar left of the 1.0 line is a row where
devtensor is faster. Only the standard library: no plotting package to
install.
"""

import html
import os
import sys

# The rows of whole models; the operation rows are in the tables themselves.
MODEL_ROWS = ("train step", "infer", "generate")
COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]


def ratios(path):
    """{row: devtensor / PyTorch} of the model rows of one saved run."""
    found = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 9 or not cells[0].startswith(MODEL_ROWS):
                continue
            try:
                found[cells[0]] = float(cells[-1])
            except ValueError:
                pass  # '-': PyTorch did not run this row
    return found


def main(paths):
    if not paths:
        sys.exit(__doc__)
    runs = [(os.path.basename(p).removesuffix(".txt"), ratios(p)) for p in paths]
    rows = []
    for _, found in runs:
        rows += [r for r in found if r not in rows]
    bar, gap, label_w, plot_w, top = 12, 10, 330, 420, 40
    group = bar * len(runs) + gap
    height = top + group * len(rows) + 20 * len(runs) + 40
    widest = max([v for _, f in runs for v in f.values()] + [1.5])
    x_max = min(4.0, (int(widest * 2) + 1) / 2)  # in halves, at most 4x
    scale = plot_w / x_max

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 30}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="{label_w}" y="16" font-size="13">devtensor time / PyTorch time (below 1: devtensor faster)</text>']
    for i in range(int(x_max * 2) + 1):
        x = label_w + i * 0.5 * scale
        out.append(f'<line x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" y2="{top + group * len(rows)}" '
                   f'stroke="{"#000" if i == 2 else "#ddd"}"/>')
        out.append(f'<text x="{x:.1f}" y="{top - 12}" text-anchor="middle">{i * 0.5:g}</text>')
    for r, row in enumerate(rows):
        y0 = top + r * group
        out.append(f'<text x="{label_w - 6}" y="{y0 + group / 2}" text-anchor="end">{html.escape(row)}</text>')
        for k, (_, found) in enumerate(runs):
            if row not in found:
                continue
            v = found[row]
            w = min(v, x_max) * scale
            y = y0 + k * bar
            out.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar - 2}" fill="{COLOURS[k % len(COLOURS)]}"/>')
            out.append(f'<text x="{label_w + w + 3:.1f}" y="{y + bar - 3}">{v:.2f}</text>')
    y = top + group * len(rows) + 16
    for k, (name, _) in enumerate(runs):
        out.append(f'<rect x="{label_w}" y="{y + 20 * k}" width="10" height="10" fill="{COLOURS[k % len(COLOURS)]}"/>')
        out.append(f'<text x="{label_w + 16}" y="{y + 20 * k + 9}">{html.escape(name)}</text>')
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
