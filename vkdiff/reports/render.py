"""Render merged results into self-contained HTML: one page per device, a cross-device page, an index."""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import jinja2

from vkdiff.datamodel import Result, clip, parse_time
from vkdiff.reports import plots
from vkdiff.reports.model import (
    CARD_COLUMNS,
    COMPARISON_COLUMNS,
    NODE_COLUMNS,
    ProgramView,
    buckets,
    as_dict,
    as_list,
    CARD_KEY_COLUMNS,
    CROSS_COLUMNS,
    STATUS_ORDER,
    STATUS_STYLES,
    TABLE_COLUMNS,
    UNKNOWN_STYLE,
    Column,
    Merged,
    Row,
    columns,
    device_traits,
    trait_causes,
    fmt_num,
    natural_key,
    status_counts,
    style,
)

MAX_HEATMAPS_PER_DEVICE = 120
"""Error heatmaps drawn per device page (worst failures first); the page says when more were left out."""
MAX_SPREAD_ROWS = 15
"""Rows in the cross-device "largest SQNR spread among passing cases" table."""
MATRIX_CELL_PX = 22
RESERVED_NAMES = frozenset({"index", "cross-device"})

TEMPLATES = Path(__file__).with_name("templates")


@dataclasses.dataclass(kw_only=True)
class ReportIndex:
    """What ``render_reports`` wrote."""

    out_dir: Path
    """Folder holding every page."""
    index: Path
    """``index.html``, linking the others."""
    cross_device: Path
    """``cross-device.html``."""
    devices: dict[str, Path]
    """Per-device page by device slug."""
    results: int
    """Results rendered, one per (case, device)."""
    duplicates: int
    """Results superseded by a later one for the same (case, device)."""
    problems: list = dataclasses.field(default_factory=list)
    """Lines of the inputs that could not be read (``LineProblem``)."""
    seconds: float = 0.0
    """Wall time of the rendering."""

    @property
    def files(self) -> list[Path]:
        return [self.index, self.cross_device, *self.devices.values()]


def render_reports(result_paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike,
                   coverage: Mapping[str, Any] | None = None) -> ReportIndex:
    """Merge results files and write the HTML reports.

    When the same (case, device) appears more than once (several CI runners,
    reruns), the result with the latest ``time`` is kept and the others are
    counted as duplicates (shown on the pages, with their statuses when they differ).

    Args:
        result_paths (Sequence[path]): JSON-lines results files (``vkdiff run --results``).
        out_dir (path): folder to write ``index.html``, ``cross-device.html`` and ``<device>.html`` to; created.
        coverage (Mapping | None): ``vkdiff coverage --json``'s document for the tree the results ran, shown on
            the index (None: no coverage section).

    Returns:
        ReportIndex: the files written and counts.

    Raises:
        FileNotFoundError: a results file does not exist.

    Example (with results on disk)::

        index = render_reports(["vkdiff-results/llvmpipe.jsonl"], "vkdiff-report")
        index.devices   # {'llvmpipe': PosixPath('vkdiff-report/llvmpipe.html')}
    """
    paths = [Path(p) for p in result_paths]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"results file {str(path)!r} not found; pass files written by `vkdiff run --results`")
    return render_merged(Merged.from_paths(paths), out_dir, coverage)


def render_results(results: Iterable[Result], out_dir: str | os.PathLike,
                   sources: Sequence[str | os.PathLike] = ()) -> ReportIndex:
    """Like ``render_reports`` for results already in memory (``sources`` only labels the pages)."""
    return render_merged(Merged.from_results(results, sources=sources), out_dir)


def render_merged(merged: Merged, out_dir: str | os.PathLike, coverage: Mapping[str, Any] | None = None) -> ReportIndex:
    """Write every page for already merged results."""
    import time

    start = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    env = _environment()
    devices = merged.devices()
    files = _file_names(devices)
    generated = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    common = {"files": files, "generated": generated, "sources": merged.sources, "devices": devices}

    summaries = {}
    written: dict[str, Path] = {}
    for device in devices:
        context = _device_context(merged, device)
        summaries[device] = context
        path = out / files[device]
        path.write_text(env.get_template("device.html.j2").render(**common, **context), encoding="utf-8")
        written[device] = path

    cross = _cross_context(merged, devices, summaries)
    cross_path = out / "cross-device.html"
    cross_path.write_text(env.get_template("cross_device.html.j2").render(**common, **cross), encoding="utf-8")

    index_path = out / "index.html"
    index_path.write_text(env.get_template("index.html.j2").render(
        **common, summaries=summaries, cross=cross, total_read=merged.total_read, problems=merged.problems,
        version_table=_version_table(summaries), buckets=buckets(merged.rows.values()),
        results=len(merged.rows), duplicates=sum(merged.duplicates.values()), coverage=coverage), encoding="utf-8")
    return ReportIndex(out_dir=out, index=index_path, cross_device=cross_path, devices=written,
                       results=len(merged.rows), duplicates=sum(merged.duplicates.values()), problems=merged.problems,
                       seconds=time.perf_counter() - start)


# --------------------------------------------------------------------------- jinja


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.globals.update(style=style, STATUS_STYLES=STATUS_STYLES, UNKNOWN_STYLE=UNKNOWN_STYLE, fmt_num=fmt_num,
                       sort_value=_sort_value, heatmap_legend=plots.heatmap_legend_css(), clip=clip,
                       TABLE_COLUMNS=columns(TABLE_COLUMNS), CARD_COLUMNS=columns(CARD_COLUMNS),
                       CARD_KEY_COLUMNS=columns(CARD_KEY_COLUMNS),
                       CROSS_COLUMNS=columns(CROSS_COLUMNS), MAX_HEATMAPS=MAX_HEATMAPS_PER_DEVICE,
                       COMPARISON_COLUMNS=columns(COMPARISON_COLUMNS), NODE_COLUMNS=NODE_COLUMNS,
                       compact=_compact, ordered=_ordered, as_list=as_list, as_dict=as_dict)
    return env


def _file_names(devices: Sequence[str]) -> dict[str, str]:
    names = {}
    for device in devices:
        name = f"device-{device}" if device.lower() in RESERVED_NAMES else device
        names[device] = f"{name}.html"
    return names


def _sort_value(column: Column, row: Row) -> str:
    """``data-sort`` attribute: numbers as floats (JS compares numerically), the rest as text."""
    value = column.sort(row)
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, float)):
        value = float(value)
        if math.isnan(value):
            return "-1e308"
        return repr(max(min(value, 1e308), -1e308))
    return column.text(row)


def _ordered(mapping: Any, first: Sequence[str]) -> Any:
    """``mapping`` with the ``first`` keys leading (tolerance: atol, rtol, acc, eps)."""
    if not isinstance(mapping, dict):
        return mapping
    return {**{k: mapping[k] for k in first if k in mapping}, **{k: v for k, v in mapping.items() if k not in first}}


def _compact(value: Any, limit: int = 160) -> str:
    """Short one-line text of a dict/list field (dispatch sizes, spec constants)."""
    if value in (None, "", [], {}):
        return "—"
    if isinstance(value, dict):
        text = ", ".join(f"{k}={_compact(v, limit)}" for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(_compact(v, limit) for v in value) + "]"
    elif isinstance(value, float):
        text = fmt_num(value)
    else:
        text = str(value)
    return clip(text, limit)


# --------------------------------------------------------------------------- device page


def _identity(rows: Sequence[Row]) -> tuple[dict[str, Any], list[str]]:
    """Device info of the latest result, and the distinct "name — driver" seen (several = mixed runners)."""
    latest = max(rows, key=lambda r: parse_time(r.result.time)).result
    info = dict(as_dict(latest.device_info))
    info["features"] = as_list(info.get("features"))
    info["limits"] = as_dict(info.get("limits"))
    seen = Counter()
    for r in rows:
        di = r.result.device_info if isinstance(r.result.device_info, dict) else {}
        seen[f"{di.get('name', '?')} — driver {di.get('driver', '?')}"] += 1
    return info, [f"{k} ({n} results)" for k, n in seen.most_common()] if len(seen) > 1 else []


def _identity_pairs(info: dict[str, Any]) -> list[tuple[str, str]]:
    pairs = []
    for key, label in (("name", "adapter"), ("vendor", "vendor"), ("vendor_id", "vendor id"), ("driver", "driver"),
                       ("backend", "backend"), ("adapter_type", "type")):
        value = info.get(key)
        if value in (None, ""):
            continue
        pairs.append((label, f"{value:#06x}" if key == "vendor_id" and isinstance(value, int) else clip(value, 120)))
    return pairs


def _versions(rows: Sequence[Row]) -> list[tuple[str, str]]:
    values: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        for key, value in (r.result.versions or {}).items() if isinstance(r.result.versions, dict) else ():
            values[key][str(value)] += 1
    out = []
    for key in sorted(values):
        found = values[key]
        out.append((key, next(iter(found)) if len(found) == 1 else
                    ", ".join(f"{v} ({n})" for v, n in found.most_common())))
    return out


def _version_table(summaries: dict[str, dict]) -> list[tuple[str, list[str], bool]]:
    """``(package, value per device, differs)`` so a reader sees when devices ran different stacks."""
    per_device = {d: dict(s["versions"]) for d, s in summaries.items()}
    keys = sorted({k for versions in per_device.values() for k in versions})
    rows = []
    for key in keys:
        values = [per_device[d].get(key, "—") for d in summaries]
        rows.append((key, values, len(set(values)) > 1))
    return rows


def _matrix(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per op: variant columns, shape rows (natural order) split into side-by-side blocks."""
    by_op: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_op[r.op].append(r)
    out = []
    for op in sorted(by_op, key=natural_key):
        group = by_op[op]
        cols = sorted({r.column for r in group}, key=lambda v: (v.count("-"), natural_key(v)))
        shapes = sorted({r.shape for r in group}, key=natural_key)
        cell = {(r.shape, r.column): r for r in group}
        label_px = 7 * max((len(s) for s in shapes), default=4) + 24
        table_px = label_px + MATRIX_CELL_PX * len(cols) + 12
        blocks = max(1, min(4, 1320 // max(table_px, 1), math.ceil(len(shapes) / 24)))
        per_block = math.ceil(len(shapes) / blocks)
        body = [[(shape, [cell.get((shape, c)) for c in cols]) for shape in shapes[i:i + per_block]]
                for i in range(0, len(shapes), per_block)]
        head_px = 7 * max((len(c) for c in cols), default=4) + 12
        out.append({"op": op, "columns": cols, "blocks": body, "count": len(group), "head_px": head_px,
                    "counts": status_counts(group)})
    return out


def _hist_bars(row: Row) -> list[dict[str, Any]] | None:
    """CSS bars of a case's error histogram: exact first, then one bar per decade (log-height)."""
    hist = row.error_hist
    if hist is None:
        return None
    counts = [hist["exact"], *hist["counts"]]
    top = math.log1p(max(counts)) or 1.0
    bars = [{"label": "exact", "count": hist["exact"], "over": False, "tick": "exact"}]
    edges = hist["edges"]
    last = len(hist["counts"]) - 1
    for i, count in enumerate(hist["counts"]):
        lo, hi = edges[i], edges[i + 1]
        tick = "1" if lo == 0 else "1e-4" if lo == -4 else f"1e{hi:g}" if i == last else ""
        bars.append({"label": f"|err|/bound 1e{lo:g} … 1e{hi:g}", "count": count, "over": lo >= 0, "tick": tick})
    for bar in bars:
        bar["height"] = 0 if not bar["count"] else max(4, round(100 * math.log1p(bar["count"]) / top))
    return bars


def _device_context(merged: Merged, device: str) -> dict[str, Any]:
    rows = merged.for_device(device)
    info, mixed = _identity(rows)
    fails = [r for r in rows if r.category == "fail"]
    skips = [r for r in rows if r.category == "skip"]
    fail_groups = []
    for status in [*STATUS_ORDER, *sorted({r.status for r in fails} - set(STATUS_ORDER))]:
        group = sorted((r for r in fails if r.status == status and not r.known), key=lambda r: r.severity)
        if group:
            fail_groups.append((status, "", group))
    known = sorted((r for r in fails if r.known), key=lambda r: r.severity)
    if known:
        fail_groups.append(("known", "known upstream bugs (expectations)", known))
    skip_groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in skips:
        skip_groups[(r.status, r.reason or "(no reason recorded)")].append(r)

    with_map = sorted((r for r in fails if r.error_map is not None), key=lambda r: r.severity)
    heatmaps = {}
    for r in with_map[:MAX_HEATMAPS_PER_DEVICE]:
        heatmaps[r.anchor] = plots.heatmap_uri(r.error_map)
    failures = [r for _, _, group in fail_groups for r in group]
    programs = {r.anchor: view for r in failures if (view := ProgramView.from_row(r)) is not None}
    traits, traits_probe = device_traits(info)
    return {
        "device": device,
        "info": info,
        "identity": _identity_pairs(info),
        "traits": traits,
        "traits_probe": traits_probe,
        "title": info.get("name") or device,
        "mixed": mixed,
        "versions": _versions(rows),
        "rows": rows,
        "counts": status_counts(rows),
        "n_fail": len(fails),
        "n_known": len(known),
        "n_skip": len(skips),
        "n_pass": sum(1 for r in rows if r.category == "pass"),
        "xpass": [r for r in rows if r.xpass],
        "flaky": [r for r in rows if r.flaky],
        "duplicates": merged.duplicates.get(device, 0),
        "matrix": _matrix(rows),
        "sqnr_plot": plots.sqnr_strip(rows),
        "hist_plot": plots.error_hist_by_group(rows),
        "n_hist": sum(1 for r in rows if r.error_hist is not None),
        "failures": failures,
        "fail_groups": fail_groups,
        "skip_groups": sorted(skip_groups.items(), key=lambda item: (STATUS_ORDER.index(item[0][0])
                                                                    if item[0][0] in STATUS_ORDER else 99, -len(item[1]))),
        "heatmaps": heatmaps,
        "n_with_map": len(with_map),
        "hist_bars": {r.anchor: _hist_bars(r) for r in fails},
        "programs": programs,
    }


# --------------------------------------------------------------------------- cross-device page


def _cross_context(merged: Merged, devices: Sequence[str], summaries: dict[str, dict]) -> dict[str, Any]:
    by_case = merged.by_case()
    shared = {case: rows for case, rows in by_case.items() if len(rows) >= 2}
    divergent, nowhere, all_pass, gaps = [], [], [], []
    for case, rows in shared.items():
        cats = {r.category for r in rows.values()}
        entry = {"case": case, "rows": rows, "first": next(iter(rows.values())),
                 "failing": [d for d in devices if d in rows and rows[d].category == "fail"],
                 "passing": [d for d in devices if d in rows and rows[d].category == "pass"],
                 "known": all(r.known for r in rows.values() if r.category == "fail"),
                 "statuses": len({r.status for r in rows.values() if r.category == "fail"})}
        if "pass" in cats and "fail" in cats:
            divergent.append(entry)
        elif "fail" in cats:
            nowhere.append(entry)
        elif cats == {"pass"}:
            all_pass.append(entry)
        else:
            gaps.append(entry)
    patterns = Counter((tuple(e["failing"]), tuple(e["passing"])) for e in divergent)
    for e in divergent:
        e["pattern"] = (tuple(e["failing"]), tuple(e["passing"]))
    divergent.sort(key=lambda e: (e["known"], -patterns[e["pattern"]], e["pattern"], natural_key(e["case"])))
    nowhere.sort(key=lambda e: (e["known"], -e["statuses"], natural_key(e["case"])))
    gaps.sort(key=lambda e: natural_key(e["case"]))
    spread = []
    for e in all_pass:
        finite = {d: r.sqnr for d, r in e["rows"].items() if r.sqnr is not None and math.isfinite(r.sqnr)}
        if len(finite) >= 2:
            lo, hi = min(finite, key=finite.get), max(finite, key=finite.get)
            spread.append({**e, "spread": finite[hi] - finite[lo], "lo": lo, "hi": hi})
    spread.sort(key=lambda e: -e["spread"])
    pass_by_op = Counter(e["first"].op for e in all_pass)
    scatter, ref = plots.sqnr_cross(shared, devices) if len(devices) >= 2 else (None, "")
    trait_groups, unattributed = _by_trait(shared, devices)
    return {
        "shared": len(shared),
        "single": len(by_case) - len(shared),
        "divergent": divergent,
        "patterns": sorted(patterns.items(), key=lambda item: -item[1]),
        "nowhere": nowhere,
        "all_pass": len(all_pass),
        "pass_by_op": sorted(pass_by_op.items(), key=lambda item: natural_key(item[0])),
        "gaps": gaps,
        "spread": spread[:MAX_SPREAD_ROWS],
        "scatter": scatter,
        "ref": ref,
        "titles": {d: summaries[d]["title"] for d in devices},
        "version_diffs": [key for key, _, differs in _version_table(summaries) if differs],
        "trait_table": _trait_table(summaries, devices),
        "trait_groups": trait_groups,
        "unattributed": unattributed,
    }


def _differs(rows: Mapping[str, Row]) -> bool:
    """Whether devices disagree on a case: its status, whether it is a known bug, or the liberty that passed it."""
    return len({(r.status, r.known, tuple(trait_causes(r))) for r in rows.values()}) > 1


def _by_trait(shared: Mapping[str, Mapping[str, Row]], devices: Sequence[str]) -> tuple[list[dict], list[dict]]:
    """Cases the devices disagree on, grouped by each probed trait their results name as the cause (a spec-allowed
    flag, a trait-keyed known bug); and those no trait names, which are the ones to look at."""
    groups: dict[str, list[dict]] = defaultdict(list)
    unattributed = []
    for case, rows in shared.items():
        if not _differs(rows):
            continue
        entry = {"case": case, "rows": rows, "first": next(iter(rows.values())),
                 "known": all(r.known for r in rows.values() if r.category == "fail")}
        causes = sorted({t for r in rows.values() for t in trait_causes(r)})
        for trait in causes:
            groups[trait].append(entry)
        if not causes:
            unattributed.append(entry)
    ordered = [{"trait": t, "entries": sorted(es, key=lambda e: natural_key(e["case"]))}
               for t, es in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))]
    return ordered, sorted(unattributed, key=lambda e: (e["known"], natural_key(e["case"])))


def _trait_table(summaries: Mapping[str, Mapping[str, Any]], devices: Sequence[str]) -> list[dict]:
    """Each probed trait with its value on every device, those that differ first."""
    values = {d: dict(summaries[d]["traits"]) for d in devices}
    names = sorted({name for table in values.values() for name in table})
    table = [{"trait": n, "values": {d: values[d].get(n, "—") for d in devices},
              "differs": len({values[d].get(n, "—") for d in devices}) > 1} for n in names]
    return sorted(table, key=lambda t: (not t["differs"], t["trait"]))

