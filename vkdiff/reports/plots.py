"""Plots as self-contained ``data:image/png;base64`` URIs (matplotlib, Agg, no pyplot state).

Figures cost ~0.1 s each on a small machine, so pages get a few aggregate figures;
per-failure error heatmaps skip the figure machinery (a colormapped array written
straight to PNG, ~2 ms) and share one legend drawn in CSS.
"""

from __future__ import annotations

import base64
import functools
import io
import math
from collections import defaultdict
from typing import Iterable, Mapping, Sequence

import numpy as np

from vkdiff.reports.model import Row, natural_key, style

HEATMAP_RANGE = (-2.0, 4.0)
"""log10(|error| / bound) mapped onto the heatmap colours; 0 is the tolerance edge."""
HEATMAP_STOPS: tuple[tuple[float, str], ...] = (
    (-2.0, "#f4f6f8"), (-0.001, "#9db4cc"), (0.0, "#ffe082"), (1.0, "#fb8c00"), (2.0, "#d32f2f"), (4.0, "#4a0000"),
)
"""(log10 ratio, colour) anchors: greys/blue within tolerance, yellow → dark red over it."""
NONFINITE_COLOUR = "#000000"
"""Cells holding NaN, Inf or unwritten elements (the store writes them as 1e30)."""
NONFINITE_AT = 1e29
HEATMAP_PIXELS = 224
DPI = 96


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _figure(width: float, height: float, *, left: float = 0.7, right: float = 0.25, top: float = 0.35,
            bottom: float = 0.55):
    """A figure with fixed margins in inches (``bbox_inches="tight"`` would draw everything twice)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height)
    return fig


def _save(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return data_uri(buf.getvalue())


@functools.lru_cache(maxsize=1)
def _heatmap_cmap():
    from matplotlib.colors import LinearSegmentedColormap

    low, high = HEATMAP_RANGE
    stops = [((value - low) / (high - low), colour) for value, colour in HEATMAP_STOPS]
    return LinearSegmentedColormap.from_list("vkdiff_error", stops, N=512)


def heatmap_legend_css() -> str:
    """CSS ``linear-gradient`` matching the heatmap colours (left = within tolerance)."""
    low, high = HEATMAP_RANGE
    parts = [f"{colour} {100 * (value - low) / (high - low):.2f}%" for value, colour in HEATMAP_STOPS]
    return "linear-gradient(to right, " + ", ".join(parts) + ")"


def heatmap_uri(grid: Sequence[Sequence[float]]) -> tuple[str, int, int]:
    """Colour-mapped PNG of an ``|error|/bound`` grid, one pixel per cell, with its display size.

    The browser scales it up (``image-rendering: pixelated``), which keeps the PNG at
    a few hundred bytes and the encoding at well under a millisecond.

    Args:
        grid (list[list[float]]): pooled ratios, rows × columns (≤ 32 × 32).

    Returns:
        tuple[str, int, int]: data URI, display width and height in CSS pixels.
    """
    values = np.asarray(grid, dtype=np.float64)
    nonfinite = ~np.isfinite(values) | (values >= NONFINITE_AT)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log10(np.where(nonfinite, 1.0, np.maximum(values, 0.0)))
    low, high = HEATMAP_RANGE
    rgba = _heatmap_cmap()(np.clip((logs - low) / (high - low), 0.0, 1.0), bytes=True)
    rgba[nonfinite] = (0, 0, 0, 255)
    rows, cols = values.shape
    cell = max(3, min(28, HEATMAP_PIXELS // max(rows, cols)))
    from matplotlib import image as mpimg

    buf = io.BytesIO()
    mpimg.imsave(buf, rgba, format="png", metadata={"Software": None})
    return data_uri(buf.getvalue()), cols * cell, max(rows * cell, 18)


def _finite_top(values: Iterable[float]) -> tuple[float, float]:
    """(ceiling for exact/∞ points, floor) of an SQNR axis."""
    finite = [v for v in values if math.isfinite(v)]
    top = (max(finite) if finite else 100.0) + 15.0
    bottom = min(min(finite) - 5.0, 0.0) if finite else 0.0
    return top, bottom


def _plot_value(value: float, top: float, bottom: float) -> float:
    if math.isinf(value):
        return top if value > 0 else bottom
    return value


def sqnr_strip(rows: Sequence[Row], title: str = "") -> str | None:
    """SQNR of every case, one column per variant, coloured by status; exact (∞) results on the top line."""
    points = [r for r in rows if r.sqnr is not None]
    if not points:
        return None
    variants = sorted({r.column for r in points}, key=lambda v: (v.count("-"), natural_key(v)))
    index = {v: i for i, v in enumerate(variants)}
    top, bottom = _finite_top(r.sqnr for r in points)
    by_status: dict[str, list[Row]] = defaultdict(list)
    for r in points:
        by_status[r.status].append(r)
    longest = max(len(v) for v in variants)
    width = max(6.5, 0.75 * len(variants) + 2.2)
    labels = {status: f"{status} ({len(group)})" for status, group in by_status.items()}
    ncol = max(1, min(len(labels), int((width - 0.5) / (0.3 + 0.075 * max(map(len, labels.values()))))))
    legend_rows = math.ceil(len(labels) / ncol)
    fig = _figure(width, 3.0 + 0.03 * longest + 0.2 * legend_rows, left=0.65, right=0.75,
                  top=0.15 + 0.2 * legend_rows, bottom=0.3 + 0.03 * longest)
    ax = fig.subplots()
    rng = np.random.default_rng(0)
    for status, group in sorted(by_status.items(), key=lambda item: item[0] != "PASS"):
        xs = np.array([index[r.column] for r in group], dtype=float) + rng.uniform(-0.28, 0.28, len(group))
        ys = [_plot_value(r.sqnr, top, bottom) for r in group]
        failing = status != "PASS"
        ax.scatter(xs, ys, s=22 if failing else 9, c=style(status).colour, label=labels[status],
                   marker="x" if failing else "o", linewidths=1.4 if failing else 0, alpha=0.9 if failing else 0.55,
                   zorder=3 if failing else 2)
    if any(math.isinf(r.sqnr) and r.sqnr > 0 for r in points):
        ax.axhline(top, color="#888", lw=0.6, ls=":")
        ax.annotate("exact (∞)", (1.0, top), xycoords=("axes fraction", "data"), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8, color="#555")
    ax.set_xticks(range(len(variants)), variants, rotation=25, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(variants) - 0.4)
    ax.set_ylim(bottom - 3, top + 8)
    ax.set_ylabel("SQNR (dB, higher is better)", fontsize=9)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="y", color="#eee")
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(-0.02, 1.0), frameon=False, ncol=ncol,
              handletextpad=0.2, columnspacing=1.0, borderaxespad=0.2)
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _save(fig)


def error_hist_by_group(rows: Sequence[Row]) -> str | None:
    """Fraction of output elements per ``|error|/bound`` decade, summed per (op, dtype); tolerance edge at 1."""
    groups: dict[tuple[str, str, tuple[float, ...]], list[np.ndarray | int]] = {}
    for r in rows:
        hist = r.error_hist
        if hist is None:
            continue
        key = (r.op, r.dtype or "?", tuple(hist["edges"]))
        counts = np.asarray(hist["counts"], dtype=np.float64)
        if key in groups:
            groups[key][0] = groups[key][0] + counts
            groups[key][1] += hist["exact"]
            groups[key][2] += 1
        else:
            groups[key] = [counts, hist["exact"], 1]
    if not groups:
        return None
    labels = {key: f"{key[0]} {key[1]}: {n} results, {100 * exact / max(counts.sum() + exact, 1):.3g}% exact"
              for key, (counts, exact, n) in groups.items()}
    legend_in = 0.45 + 0.066 * max(len(label) for label in labels.values())
    fig = _figure(5.9 + legend_in, 3.1, left=0.95, right=legend_in, top=0.2, bottom=0.5)
    ax = fig.subplots()
    lo_edge, hi_edge = math.inf, -math.inf
    for (op, dtype, edges), (counts, exact, _count) in sorted(groups.items(), key=lambda item: natural_key(" ".join(item[0][:2]))):
        edges_a = np.asarray(edges)
        total = counts.sum() + exact
        if total <= 0:
            continue
        centres = (edges_a[:-1] + edges_a[1:]) / 2
        with np.errstate(divide="ignore"):
            frac = np.where(counts > 0, np.log10(counts / total), np.nan)
        line, = ax.plot(centres, np.maximum(frac, FRACTION_FLOOR), marker="o", ms=3.5, lw=1.4,
                        label=labels[(op, dtype, edges)])
        if exact:
            ax.plot([edges_a[0] - 1.0], [max(math.log10(exact / total), FRACTION_FLOOR)], marker="s", ms=5,
                    color=line.get_color())
        lo_edge, hi_edge = min(lo_edge, edges_a[0]), max(hi_edge, edges_a[-1])
    if not math.isfinite(lo_edge):
        return None
    ax.axvspan(0, hi_edge, color="#d32f2f", alpha=0.07, lw=0)
    ax.axvline(0, color="#d32f2f", lw=1, ls="--")
    ax.text(0.1, 0.97, "over tolerance →", transform=ax.get_xaxis_transform(), color="#b71c1c", fontsize=8, va="top")
    ticks = [lo_edge - 1.0] + list(range(int(lo_edge), int(hi_edge) + 1, 2))
    ax.set_xticks(ticks, ["exact"] + [f"1e{t}" if t else "bound" for t in ticks[1:]], fontsize=8)
    ax.set_xlim(lo_edge - 1.6, hi_edge + 0.3)
    # log10 of the fraction on a linear axis: log-scale tick machinery costs ~0.5 s per figure
    decades = list(range(FRACTION_FLOOR, 1))
    ax.set_yticks(decades, [f"{100 * 10.0 ** d:g}%" for d in decades], fontsize=8)
    ax.set_ylim(FRACTION_FLOOR - 0.3, 0.25)
    ax.set_ylabel("share of elements (log)", fontsize=9)
    ax.set_xlabel("|error| / tolerance bound", fontsize=9)
    ax.grid(color="#eee")
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="upper left", frameon=False, bbox_to_anchor=(1.01, 1.0))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _save(fig)


FRACTION_FLOOR = -6
"""Smallest share of elements drawn in the aggregated histogram (1e-6 = 0.0001%); smaller ones sit on the floor."""

DEVICE_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


def sqnr_cross(by_case: Mapping[str, Mapping[str, Row]], devices: Sequence[str]) -> tuple[str | None, str]:
    """Scatter of every case's SQNR on each device against a reference device (the one with most SQNRs).

    Returns:
        tuple[str | None, str]: data URI (None when fewer than two devices report SQNR) and the reference slug.
    """
    have = {d: sum(1 for rows in by_case.values() if d in rows and rows[d].sqnr is not None) for d in devices}
    ranked = sorted((d for d in devices if have[d]), key=lambda d: (-have[d], natural_key(d)))
    if len(ranked) < 2:
        return None, ranked[0] if ranked else ""
    ref, others = ranked[0], ranked[1:]
    values = [r.sqnr for rows in by_case.values() for r in rows.values() if r.sqnr is not None]
    top, bottom = _finite_top(values)
    fig = _figure(6.0, 5.0, left=0.7, right=0.2, top=0.15, bottom=0.55)
    ax = fig.subplots()
    for i, other in enumerate(others):
        pairs = [(rows[ref], rows[other]) for rows in by_case.values()
                 if ref in rows and other in rows and rows[ref].sqnr is not None and rows[other].sqnr is not None]
        if not pairs:
            continue
        colour = DEVICE_COLOURS[i % len(DEVICE_COLOURS)]
        ok = [(a, b) for a, b in pairs if a.category != "fail" and b.category != "fail"]
        bad = [(a, b) for a, b in pairs if a.category == "fail" or b.category == "fail"]
        for subset, marker, size, suffix in ((ok, "o", 12, ""), (bad, "X", 46, ", failing on either")):
            if subset:
                ax.scatter([_plot_value(a.sqnr, top, bottom) for a, _ in subset],
                           [_plot_value(b.sqnr, top, bottom) for _, b in subset],
                           s=size, marker=marker, color=colour, alpha=0.6 if marker == "o" else 0.95, lw=0,
                           label=f"{other} ({len(subset)}{suffix})")
    ax.plot([bottom - 3, top + 3], [bottom - 3, top + 3], color="#999", lw=0.8, ls="--", zorder=0)
    ax.set_xlim(bottom - 3, top + 5)
    ax.set_ylim(bottom - 3, top + 5)
    ax.set_xlabel(f"SQNR on {ref} (dB)", fontsize=9)
    ax.set_ylabel("SQNR on the other device (dB)", fontsize=9)
    ax.text(0.98, 0.03, "below the diagonal: lower SQNR\non that device than on " + ref, transform=ax.transAxes, ha="right",
            va="bottom", fontsize=8, color="#555")
    ax.text(top, top, " exact", fontsize=8, color="#555", va="bottom")
    ax.tick_params(labelsize=8)
    ax.grid(color="#eee")
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="upper left", frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _save(fig), ref
