#!/usr/bin/python3
"""Plot measured against simulated nccl-tests results from the CSV of `rocesim validate`.

Usage:
    python3 validation/plot_validation.py VALIDATION.csv OUT.png [--title TEXT]

The CSV has a header line whose fields are `name` or `name [unit]`, then one row per
measured size. Columns are found by name (order and extra columns do not matter); these are
required: source, table, collective, nranks, size_bytes, measured_time_us, simulated_time_us,
measured_busbw_GBps, simulated_busbw_GBps, time_error ((sim - meas) / meas) and band
(<1MiB, 1-64MiB or >=64MiB); roofline_time_us, the line-rate roofline's time, is drawn where
the CSV has it.

The figure has one panel per (source, table), in order of first appearance: bus bandwidth
against message size (measured as markers, simulated as a line, the roofline's bus bandwidth
as a dashed level) above a smaller panel with
the relative time error in percent. Rows with a non-finite value are left out of the curve
they belong to. The PNG is deterministic for a given CSV (fixed size per panel, fixed dpi,
default style, no software tag) and is written under a temporary name, then renamed.

Exit status: 0 done; 2 bad input (missing file, missing column, empty CSV, unreadable
value); 1 matplotlib missing or the PNG could not be written.

Needs only the standard library and matplotlib (Debian: python3-matplotlib).
"""

import argparse
import csv
import math
import os
import re
import sys

REQUIRED = (
    "source",
    "table",
    "collective",
    "nranks",
    "size_bytes",
    "measured_time_us",
    "simulated_time_us",
    "measured_busbw_GBps",
    "simulated_busbw_GBps",
    "time_error",
    "band",
)
# Read when present (CSVs of older builds lack it): the line-rate roofline's time.
OPTIONAL = ("roofline_time_us",)
TEXT_COLUMNS = ("source", "table", "collective", "band")
BANDS = ("<1MiB", "1-64MiB", ">=64MiB")
BAND_COLOURS = {"<1MiB": "#1b9e77", "1-64MiB": "#d95f02", ">=64MiB": "#7570b3"}
BAND_EDGES = (1 << 20, 64 << 20)  # the band boundaries: 1 MiB and 64 MiB

PANEL_W_IN = 5.2  # inches per panel
PANEL_H_IN = 4.4
TITLE_IN = 0.12  # from the top of the figure to the title
LEGEND_IN = 0.42  # from the top of the figure to the legend
LEGEND_ROW_IN = 0.24
PANEL_TITLE_IN = 0.7  # two-line panel titles above the top row
BOTTOM_IN = 0.15
DPI = 110
MAX_COLUMNS = 3


class InputError(Exception):
    """A problem with the CSV: reported with exit status 2."""


def column_name(field):
    """`name [unit]` -> `name`; `name` -> `name`."""
    m = re.fullmatch(r"\s*(.*?)\s*(\[[^\]]*\])?\s*", field)
    return m.group(1) if m else field.strip()


def read_rows(path):
    """The CSV's rows as dicts of the required columns, numbers converted."""
    try:
        f = open(path, newline="", encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    with f:
        try:
            lines = list(csv.reader(f))
        except (csv.Error, UnicodeDecodeError) as e:
            raise InputError(f"{path}: not a readable CSV file: {e}")
    lines = [l for l in lines if any(x.strip() for x in l)]
    if not lines:
        raise InputError(f"{path}: empty CSV (no header line)")
    header = [column_name(x) for x in lines[0]]
    index = {}
    for i, name in enumerate(header):
        index.setdefault(name, i)
    missing = [c for c in REQUIRED if c not in index]
    if missing:
        raise InputError(
            f"{path}: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (the header has: {', '.join(header)})"
        )
    if len(lines) == 1:
        raise InputError(f"{path}: empty CSV (a header line but no rows)")
    rows = []
    for n, line in enumerate(lines[1:], start=2):
        row = {}
        for c in REQUIRED + tuple(c for c in OPTIONAL if c in index):
            i = index[c]
            if i >= len(line):
                raise InputError(f"{path}:{n}: the row has no '{c}' field")
            text = line[i].strip()
            if c in TEXT_COLUMNS:
                row[c] = text
                continue
            try:
                row[c] = float(text)
            except ValueError:
                raise InputError(f"{path}:{n}: '{c}' is not a number: '{text}'")
        rows.append(row)
    return rows


def group_panels(rows):
    """Rows grouped by (source, table) in order of first appearance, each sorted by size."""
    panels = {}
    for r in rows:
        panels.setdefault((r["source"], r["table"]), []).append(r)
    for k in panels:
        panels[k].sort(key=lambda r: r["size_bytes"])
    return panels


def size_label(exponent):
    """2**exponent bytes as 8B, 1KiB, 32MiB, 1GiB, ..."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    u = min(exponent // 10, len(units) - 1) if exponent >= 0 else 0
    value = 2.0 ** (exponent - 10 * u)
    text = f"{value:g}" if value < 1 else str(int(value))
    return text + units[u]


def size_ticks(lo, hi):
    """Power-of-two exponents for the major ticks: at most 7, on multiples of a step that
    keeps the unit boundaries (1KiB, 1MiB, ...) among them."""
    a = math.floor(math.log2(lo))
    b = math.ceil(math.log2(hi))
    for step in (1, 2, 5, 10, 20):
        ticks = [k for k in range(a, b + 1) if k % step == 0]
        if len(ticks) <= 7:
            return ticks or [a]
    return [a, b]


def finite(*values):
    return all(math.isfinite(v) for v in values)


def draw_panel(fig, spec, key, rows, show_source):
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    source, table = key
    inner = spec.subgridspec(2, 1, height_ratios=(3, 1.25), hspace=0.08)
    ax = fig.add_subplot(inner[0])
    ex = fig.add_subplot(inner[1], sharex=ax)

    sizes = [r["size_bytes"] for r in rows if r["size_bytes"] > 0]
    meas = [(r["size_bytes"], r["measured_busbw_GBps"]) for r in rows
            if r["size_bytes"] > 0 and finite(r["measured_busbw_GBps"])]
    # non-finite simulated values stay as NaN: the line breaks there
    sim = [(r["size_bytes"], r["simulated_busbw_GBps"] if finite(r["simulated_busbw_GBps"])
            else math.nan) for r in rows if r["size_bytes"] > 0]
    err = [(r["size_bytes"], 100.0 * r["time_error"], r["band"]) for r in rows
           if r["size_bytes"] > 0 and finite(r["time_error"])]

    if sim:
        ax.plot([x for x, _ in sim], [y for _, y in sim], "-", marker=".", ms=3.5,
                color="C1", lw=1.6, label="simulated", zorder=2)
    if meas:
        ax.plot([x for x, _ in meas], [y for _, y in meas], "o", ms=4.5, mfc="none",
                mec="black", mew=1.0, label="measured", zorder=3)
    # The roofline's bus bandwidth, the same at every size: busbw x time / roofline time.
    roof = next((r["measured_busbw_GBps"] * r["measured_time_us"] / r["roofline_time_us"]
                 for r in rows if finite(r.get("roofline_time_us", math.nan))
                 and r["roofline_time_us"] > 0 and finite(r["measured_busbw_GBps"])
                 and r["measured_busbw_GBps"] > 0), None)
    if roof is not None and sizes:
        ax.plot([min(sizes), max(sizes)], [roof, roof], "--", color="0.45", lw=1.0,
                label="line-rate roofline", zorder=1)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.grid(True, which="major", color="0.88", lw=0.6)

    if err:
        ex.plot([x for x, _, _ in err], [y for _, y, _ in err], "-", color="0.7", lw=0.8,
                zorder=1)
        for band in BANDS + tuple(sorted({b for _, _, b in err} - set(BANDS))):
            pts = [(x, y) for x, y, b in err if b == band]
            if pts:
                ex.plot([x for x, _ in pts], [y for _, y in pts], "o", ms=3.2,
                        color=BAND_COLOURS.get(band, "0.4"), zorder=2)
        worst = max(abs(y) for _, y, _ in err)
        if worst > 100:  # linear to +-100 %, logarithmic above
            ex.set_yscale("symlog", linthresh=100)
            top = 10 ** math.ceil(math.log10(worst))
            marks = [-100, -50, 0, 50, 100] + [10 ** k for k in range(3, round(math.log10(top)) + 1)]
            ex.yaxis.set_major_locator(FixedLocator(marks))
            ex.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ex.yaxis.set_minor_formatter(NullFormatter())
    ex.axhline(0, color="black", lw=0.7, zorder=1.8)
    ex.set_ylabel("time error (%)")
    ex.grid(True, which="major", color="0.88", lw=0.6)

    for a in (ax, ex):
        for edge in BAND_EDGES:
            a.axvline(edge, color="0.45", lw=0.8, ls=":", zorder=1.8)

    ax.set_xscale("log", base=2)
    if sizes:
        lo, hi = min(sizes), max(sizes)
        if lo == hi:
            lo, hi = lo / 2, hi * 2
        ticks = size_ticks(lo, hi)
        ax.set_xlim(lo / 2 ** 0.5, hi * 2 ** 0.5)
        ex.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in ticks]))
        ex.xaxis.set_major_formatter(
            FuncFormatter(lambda v, _pos: size_label(round(math.log2(v))) if v > 0 else ""))
        minors = range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)
        ex.xaxis.set_minor_locator(FixedLocator([2.0 ** k for k in minors]))
        ex.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", which="both", labelbottom=False)
    ex.set_xlabel("message size")

    nranks = sorted({int(r["nranks"]) for r in rows if finite(r["nranks"])})
    collectives = sorted({r["collective"] for r in rows if r["collective"]})
    ranks_text = "/".join(str(n) for n in nranks) if nranks else "?"
    title = f"{table}\n{', '.join(collectives) or '?'}, {ranks_text} ranks"
    if show_source:
        title += f"  ({os.path.splitext(os.path.basename(source))[0]})"
    ax.set_title(title, fontsize=9.5)


def plot(rows, out, title):
    try:
        import matplotlib
    except ImportError:
        print("plot_validation: matplotlib is missing: install python3-matplotlib "
              "(scripts/install-deps) and run with the system python3", file=sys.stderr)
        return 1
    matplotlib.use("Agg")
    matplotlib.rcdefaults()  # ignore any matplotlibrc: the same CSV gives the same PNG
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    panels = group_panels(rows)
    n = len(panels)
    ncols = min(MAX_COLUMNS, n)
    nrows = math.ceil(n / ncols)
    legend_ncol = 6 if ncols > 1 else 2
    legend_rows = math.ceil(6 / legend_ncol)
    top_in = LEGEND_IN + legend_rows * LEGEND_ROW_IN + PANEL_TITLE_IN
    width = ncols * PANEL_W_IN
    height = nrows * PANEL_H_IN + top_in + BOTTOM_IN
    fig = plt.figure(figsize=(width, height), dpi=DPI)
    grid = fig.add_gridspec(
        nrows, ncols,
        left=0.75 / width, right=1 - 0.2 / width,
        top=1 - top_in / height, bottom=BOTTOM_IN / height + 0.5 / height,
        wspace=0.45, hspace=0.5,
    )
    show_source = len({s for s, _ in panels}) > 1
    for i, (key, prow) in enumerate(panels.items()):
        draw_panel(fig, grid[i // ncols, i % ncols], key, prow, show_source)

    fig.suptitle(title, y=1 - TITLE_IN / height, va="top", fontsize=12)
    handles = [
        Line2D([], [], ls="none", marker="o", mfc="none", mec="black", label="measured busbw"),
        Line2D([], [], color="C1", lw=1.6, marker=".", ms=3.5, label="simulated busbw"),
        Line2D([], [], color="0.45", ls="--", lw=1.0, label="line-rate roofline"),
    ] + [
        Line2D([], [], ls="none", marker="o", ms=4, color=BAND_COLOURS[b],
               label=f"time error, {b}")
        for b in BANDS
    ]
    fig.legend(handles=handles, loc="upper center", ncol=legend_ncol, frameon=False,
               fontsize=8.5, bbox_to_anchor=(0.5, 1 - LEGEND_IN / height))

    directory = os.path.dirname(os.path.abspath(out))
    tmp = os.path.join(directory, f".{os.path.basename(out)}.tmp-{os.getpid()}")
    try:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})
        os.replace(tmp, out)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        print(f"plot_validation: {out}: cannot write: {e.strerror or e}", file=sys.stderr)
        return 1
    finally:
        plt.close(fig)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="plot_validation.py",
        description="Plot measured against simulated bus bandwidth and the relative time "
                    "error from the CSV of `rocesim validate`.")
    p.add_argument("csv", metavar="VALIDATION.csv", help="CSV written by rocesim validate")
    p.add_argument("out", metavar="OUT.png", help="PNG to write")
    p.add_argument("--title", default="measured vs simulated", help="figure title")
    a = p.parse_args(argv)
    try:
        rows = read_rows(a.csv)
    except InputError as e:
        print(f"plot_validation: {e}", file=sys.stderr)
        return 2
    return plot(rows, a.out, a.title)


if __name__ == "__main__":
    sys.exit(main())
