"""What the reports show: results merged across files, one ``Row`` per (case, device), columns declared once.

This module reads only the data model (``Result``, ``Status``, the ``merge`` rule), the
results store (``load``) and the node table's rows (``inspector``); it knows nothing about
how results were produced. A row's place in a matrix comes from the structured fields of
its result (``shape``, ``knobs``, ``rule``), never from parsing ids. A program's result
shows its output comparisons, delegates and node table (``ProgramView``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from collections import Counter, defaultdict
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

from vkdiff.datamodel import Result, Status, bucket_of, clip, merge
from vkdiff.reports.inspector import node_row
from vkdiff.store import INCOMPLETE_FLAG, LineProblem, read

Category = Literal["pass", "skip", "fail"]
"""How a status counts: success, says nothing about correctness, or a failure (unknown names are failures)."""

UNKNOWN_DEVICE = "unknown-device"


@dataclasses.dataclass(kw_only=True, frozen=True)
class StatusStyle:
    """How a status looks in badges and matrix cells."""

    colour: str
    """Background colour."""
    ink: str
    """Text colour on that background."""
    glyph: str
    """One character for matrix cells (readable without colour)."""
    title: str
    """Tooltip: what the status means."""


STATUS_STYLES: dict[str, StatusStyle] = {
    "PASS": StatusStyle(colour="#2e7d32", ink="#fff", glyph="✓", title="every output within tolerance"),
    "FAIL_NUMERIC": StatusStyle(colour="#d32f2f", ink="#fff", glyph="✗", title="finite but over tolerance"),
    "FAIL_NAN": StatusStyle(colour="#6a0d0d", ink="#fff", glyph="N", title="NaN/Inf where the reference is finite"),
    "FAIL_PORTABILITY": StatusStyle(colour="#ad1457", ink="#fff", glyph="P",
                                    title="wrong on some conformant device (a liberty the Vulkan spec grants)"),
    "FAIL_DRIVER": StatusStyle(colour="#1a237e", ink="#fff", glyph="D",
                               title="outside what the Vulkan spec allows for the shader's arithmetic"),
    "NONDETERMINISTIC": StatusStyle(colour="#f9a825", ink="#000", glyph="≠", title="repeat runs differ bitwise"),
    "FAIL_SYNC": StatusStyle(colour="#e65100", ink="#fff", glyph="S", title="accesses not ordered by a barrier"),
    "FAIL_OOB": StatusStyle(colour="#4a148c", ink="#fff", glyph="O", title="a dispatch wrote outside its tensor"),
    "DTYPE_MISMATCH": StatusStyle(colour="#c2185b", ink="#fff", glyph="T", title="shader binding format differs from the tensor"),
    "FAIL_CHECK": StatusStyle(colour="#7b1fa2", ink="#fff", glyph="C", title="invariant broke or output unwritten"),
    "BUILD_FAIL": StatusStyle(colour="#ef6c00", ink="#fff", glyph="B", title="shader codegen/compile/load failed"),
    "LOWER_FAIL": StatusStyle(colour="#8d6e63", ink="#fff", glyph="L", title="ExecuTorch could not lower"),
    "ERROR": StatusStyle(colour="#212121", ink="#fff", glyph="!", title="harness bug or unexpected exception"),
    "NOT_SUPPORTED": StatusStyle(colour="#90a4ae", ink="#000", glyph="–", title="device lacks a feature (not a failure)"),
    "NOT_RUN": StatusStyle(colour="#dfe4e8", ink="#000", glyph="∅", title="a prerequisite is absent"),
}
UNKNOWN_STYLE = StatusStyle(colour="#546e7a", ink="#fff", glyph="?", title="status unknown to this vkdiff version")

STATUS_ORDER: tuple[str, ...] = tuple(STATUS_STYLES)
"""Display order: pass, then failures from most to least numerically interesting, then skips."""


# --------------------------------------------------------------------------- values


def as_float(value: Any) -> float | None:
    """A metric as float; the store writes inf/nan as strings; anything else unparsable is None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def as_int(value: Any) -> int | None:
    number = as_float(value)
    return int(number) if number is not None and math.isfinite(number) else None


def fmt_num(value: Any, *, inf: str = "∞") -> str:
    """Compact number: 4 significant digits, exponent for tiny/huge, ``—`` when absent."""
    number = as_float(value)
    if number is None:
        return "—" if value in (None, "") else clip(value, 40)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return inf if number > 0 else "−" + inf
    if number == 0:
        return "0"
    if abs(number) >= 1e5 or abs(number) < 1e-3:
        return f"{number:.3e}"
    return f"{number:.4g}"


def as_list(value: Any) -> list:
    """A list field (flags, shaders) as a list of strings; a lone string is one item, other junk none."""
    if value in (None, ""):
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return []


def as_dict(value: Any) -> dict:
    """A dict field (dispatch, tolerance, device_info) or ``{}``."""
    return value if isinstance(value, dict) else {}


def trait_text(value: Any) -> str:
    """One probed device trait as a report shows it (``device_info["traits"]``: a word, a number, a flag, a table of
    integers, or why it was not measured).

    Example::

        >>> trait_text({"not_measured": "the device lacks shader-f16"}), trait_text(2.5), trait_text(True)
        ('not measured: the device lacks shader-f16', '2.5', 'yes')
    """
    if isinstance(value, dict) and set(value) == {"not_measured"}:
        return f"not measured: {clip(value['not_measured'], 200)}"
    if isinstance(value, dict) and set(value) == {"error"}:
        return f"probe failed: {clip(value['error'], 200)}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{k} = {trait_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(trait_text(v) for v in value)
    if isinstance(value, (int, float)) or value in ("inf", "nan"):
        return str(value) if isinstance(value, int) else fmt_num(value)
    return clip(str(value), 200)


def device_traits(info: Any) -> tuple[list[tuple[str, str]], str]:
    """(trait → text, in name order; how they were probed) of a result's ``device_info``; no traits, ``([], "")``."""
    traits = as_dict(as_dict(info).get("traits"))
    probe = as_dict(traits.get("probe"))
    pairs = [(str(name), trait_text(value)) for name, value in sorted(traits.items()) if name != "probe"]
    how = f"probe {clip(probe.get('version', '?'), 40)}, {fmt_num(probe.get('seconds'))} s" if probe else ""
    return pairs, how if pairs else ""


SPEC_ALLOWED = "spec-allowed:"
"""Flag prefix of a result the spec envelope passed, naming the trait whose liberty explains it."""


def trait_causes(row: "Row") -> list[str]:
    """The probed traits a row names as the cause of what it shows: the trait of a ``spec-allowed:<trait>`` flag, and
    those a trait-keyed known bug needs.

    Example::

        >>> passed = Result(case="tan[W67]", op="aten.tan.default", device="d", status="PASS",
        ...                 flags=["spec-allowed:sin_cos_max_abs"])
        >>> trait_causes(Row.from_result(passed))
        ['sin_cos_max_abs']
    """
    flags = [f[len(SPEC_ALLOWED):] for f in as_list(row.result.flags) if isinstance(f, str) and f.startswith(SPEC_ALLOWED)]
    known = list(row.expectation.traits) if row.expectation is not None and row.known else []
    return sorted(set(flags) | set(known))


def natural_key(text: str) -> tuple:
    """Sort ``M4`` before ``M13``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def slugify(text: str) -> str:
    """A file-name-safe slug (``[A-Za-z0-9._-]``)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return slug or UNKNOWN_DEVICE


def anchor(case: str) -> str:
    """Stable HTML id of a case (the same on every page)."""
    digest = hashlib.blake2s(case.encode(), digest_size=3).hexdigest()
    return f"r-{re.sub(r'[^A-Za-z0-9_-]+', '-', case).strip('-')[:80]}-{digest}"


def category(status: str) -> Category:
    try:
        verdict = Status[status]
    except KeyError:
        return "fail"
    if verdict.is_success():
        return "pass"
    return "skip" if verdict.is_skip() else "fail"


def style(status: str) -> StatusStyle:
    return STATUS_STYLES.get(status, UNKNOWN_STYLE)


# --------------------------------------------------------------------------- records


IN_PROGRAM = "known-bug"
"""``Result.expectation["outcome"]`` of a finding matched inside a program (``vkdiff.verdicts.expectations``)."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Expectation:
    """A known upstream bug this result is expected to show (rendered as "known")."""

    id: str = ""
    """Signature or identifier of the expectation."""
    link: str = ""
    """Issue or pull request URL."""
    reason: str = ""
    """Why it is expected."""
    outcome: str = ""
    """What the harness made of it (``known``, ``unexpected-pass``), when it says."""
    traits: tuple[str, ...] = ()
    """The probed device traits the bug needs (a trait-keyed expectation), by name."""
    minimal: str = ""
    """A finding matched inside a program: its minimal shape."""

    @property
    def in_program(self) -> bool:
        """A known ET-VK bug the program hits: the program's failure stands, and the report names the bug."""
        return self.outcome == IN_PROGRAM

    @classmethod
    def from_value(cls, value: Any) -> "Expectation | None":
        """From a dict, an object with ``id``/``link``/``reason`` attributes, or a plain string; None when empty."""
        if value in (None, "", {}, []):
            return None
        if isinstance(value, str):
            return cls(reason=clip(value))
        if isinstance(value, Mapping):
            get = value.get
        else:
            def get(key, default=None):
                return getattr(value, key, default)
        link = str(get("link", "") or get("url", "") or "")
        if not re.match(r"^https?://", link):
            link = ""
        traits = get("traits", ()) or ()
        return cls(id=clip(get("id", "") or get("signature", "") or "", 80), link=link,
                   reason=clip(get("reason", "") or ""), outcome=clip(get("outcome", "") or "", 40),
                   traits=tuple(clip(t, 60) for t in traits if isinstance(t, str)) if isinstance(traits, list) else (),
                   minimal=clip(get("minimal", "") or "", 300))


@dataclasses.dataclass(kw_only=True)
class Row:
    """One (case, device) after merging: the latest result plus what the report derives from it."""

    result: Result
    """The kept result (latest ``time``)."""
    superseded: list[Result] = dataclasses.field(default_factory=list)
    """Earlier results for the same (case, device), oldest first."""
    device: str
    """File-name-safe device slug."""
    op: str
    """Operator (``op`` field, else the case id stem)."""
    shape: str
    """The matrix row: a kernel case's sizes (``M13-K256-N40-g32``), a model case's knob set (``8da4w-vulkan``)."""
    column: str
    """The matrix column: a kernel case's knob set (``fp16-buffer``), a model case's rule (``numerics``)."""
    dtype: str
    """The ``dtype`` knob (``fp16``), for aggregated histograms; empty when the case has none."""
    expectation: Expectation | None = None
    """Known upstream bug this result carries (``Result.expectation`` once the store has it)."""

    @classmethod
    def from_result(cls, result: Result) -> "Row":
        """Place a result: kernel cases by shape (row) × knob set (column), model cases by knob set × rule."""
        shape = as_dict(result.shape)
        knobs = as_dict(result.knobs)
        variant = str(result.variant or "") or "-".join(str(v) for v in knobs.values()) or "—"
        if shape:
            row, column = "-".join(f"{k}{v}" for k, v in shape.items()), variant
        else:
            row, column = variant, str(result.rule or "") or "—"
        return cls(result=result, device=slugify(str(result.column or UNKNOWN_DEVICE)),
                   op=str(result.op or result.case or "?"), shape=row, column=column,
                   dtype=str(knobs.get("dtype", "")),
                   expectation=Expectation.from_value(getattr(result, "expectation", None)))

    # identity -------------------------------------------------------------
    @property
    def case(self) -> str:
        return str(self.result.case)

    @property
    def anchor(self) -> str:
        return anchor(self.case)

    @property
    def status(self) -> str:
        return str(self.result.status)

    @property
    def category(self) -> Category:
        """The status's category; an incomplete record is listed with the failures, whatever it says."""
        if INCOMPLETE_FLAG in as_list(self.result.flags):
            return "fail"
        return category(self.status)

    @property
    def style(self) -> StatusStyle:
        return style(self.status)

    @property
    def known(self) -> bool:
        """A failure that an expectation explains (xfail); not a program's failure that names a known bug it hits."""
        return self.expectation is not None and self.category == "fail" and not self.expectation.in_program

    @property
    def stale(self) -> bool:
        """A port whose C++ differs in the tree produced it: shown on every badge, never a plain PASS."""
        return "port-stale" in as_list(self.result.flags)

    @property
    def xpass(self) -> bool:
        """An expectation says it should fail, yet it passed: the bug may be fixed."""
        return self.expectation is not None and self.category == "pass"

    @property
    def history(self) -> list[str]:
        """Statuses of superseded results, oldest first."""
        return [str(r.status) for r in self.superseded]

    @property
    def flaky(self) -> bool:
        """The same (case, device) got different statuses across runs."""
        return any(s != self.status for s in self.history)

    # metrics --------------------------------------------------------------
    @property
    def metrics(self) -> dict[str, Any]:
        return self.result.metrics if isinstance(self.result.metrics, dict) else {}

    @property
    def output_comparison(self) -> tuple[str, dict[str, Any]] | None:
        """``(key, statistics)`` of the comparison a program's verdict reads: eager's when recorded, else the
        reference program's (``COMPARISONS``); None for a case or a program compared with neither."""
        for key, _ in COMPARISONS:
            stats = self.metrics.get(key)
            if isinstance(stats, dict):
                return key, stats
        return None

    @property
    def numbers(self) -> dict[str, Any]:
        """The metrics the columns read: a case's own, else a program's output comparison, which carries them."""
        if any(key in self.metrics for key in ("max_abs", "sqnr_db", "mismatches")):
            return self.metrics
        main = self.output_comparison
        return main[1] if main else self.metrics

    def metric(self, key: str) -> float | None:
        return as_float(self.numbers.get(key))

    @property
    def sqnr(self) -> float | None:
        value = self.metric("sqnr_db")
        return None if value is None or math.isnan(value) else value

    @property
    def error_hist(self) -> dict[str, list] | None:
        """``{"edges", "counts", "exact"}`` when well-formed, else None."""
        hist = self.numbers.get("error_hist")
        if not isinstance(hist, dict):
            return None
        edges, counts = hist.get("edges"), hist.get("counts")
        if not (isinstance(edges, list) and isinstance(counts, list) and len(edges) == len(counts) + 1 and counts):
            return None
        edges_f = [as_float(e) for e in edges]
        counts_i = [as_int(c) for c in counts]
        if None in edges_f or None in counts_i:
            return None
        return {"edges": edges_f, "counts": counts_i, "exact": as_int(hist.get("exact")) or 0}

    @property
    def error_map(self) -> list[list[float]] | None:
        """The pooled ``|err|/bound`` grid when rectangular and numeric, else None."""
        grid = self.numbers.get("error_map")
        if not isinstance(grid, list) or not grid or not all(isinstance(r, list) for r in grid):
            return None
        width = len(grid[0])
        if width == 0 or any(len(r) != width for r in grid):
            return None
        values = [[as_float(v) for v in r] for r in grid]
        if any(v is None for r in values for v in r):
            return None
        return values  # type: ignore[return-value]

    @property
    def steps(self) -> list[dict[str, Any]]:
        """A generation's calls (prefill, decode steps) as table rows, when recorded."""
        rows = []
        recorded = self.metrics.get("steps")
        for step in recorded if isinstance(recorded, list) else []:
            step = as_dict(step)
            if "step" not in step:
                continue
            first = as_dict(step.get("first_diverging"))
            token, eager = step.get("token"), step.get("eager_token")
            rows.append({"step": step.get("step"), "kind": step.get("kind", ""), "status": str(step.get("status", "")),
                         "max_abs": fmt_num(step.get("max_abs_vs_eager")), "sqnr": fmt_num(step.get("sqnr_db")),
                         "tokens": "" if token is None else f"{token} / {eager}",
                         "first": f"{first.get('index')} {first.get('op', '')} ({first.get('shader', '')})" if first else "",
                         "failing": len(step["failing_nodes"]) if isinstance(step.get("failing_nodes"), list) else 0})
        return rows

    @property
    def extra_metrics(self) -> dict[str, str]:
        """Metric keys this report does not know, as short JSON (forward compatibility)."""
        return {k: clip(json.dumps(v, default=str), 120) for k, v in sorted(self.metrics.items())
                if k not in KNOWN_METRICS}

    @property
    def severity(self) -> tuple:
        """Sort key, worst first: unexplained before known, lowest SQNR first, then case."""
        sqnr = self.sqnr
        return (self.known, sqnr if sqnr is not None else math.inf, natural_key(self.case))

    @property
    def reason(self) -> str:
        return clip(self.result.reason)


KNOWN_METRICS = frozenset({
    "total", "mismatches", "max_abs", "max_rel", "sqnr_db", "nan_count", "inf_count", "unwritten",
    "worst_index", "first_mismatches", "shape_mismatch", "error_hist", "error_map", "steps",
    "nodes", "nodes_step", "delegates", "vs_eager", "vs_reference", "reference_note", "route",
})


# --------------------------------------------------------------------------- columns


@dataclasses.dataclass(kw_only=True, frozen=True)
class Column:
    """One report column, declared once and used by every table and card that shows it."""

    key: str
    """Stable name (``sqnr_db``)."""
    title: str
    """Header text."""
    help: str
    """Header tooltip."""
    text: Callable[[Row], str]
    """Cell text of a row."""
    sort: Callable[[Row], Any]
    """Sort key of a row (numbers sort numerically in the page)."""
    numeric: bool = False
    """Right-aligned number column."""


def _mismatch_text(row: Row) -> str:
    mismatches, total = as_int(row.numbers.get("mismatches")), as_int(row.numbers.get("total"))
    if mismatches is None and total is None:
        return "—"
    if mismatches is None:
        return f"— / {total}"
    if not total:
        return str(mismatches)
    return f"{mismatches} / {total} ({100.0 * mismatches / total:.3g}%)"


def _mismatch_frac(row: Row) -> float:
    mismatches, total = as_int(row.numbers.get("mismatches")), as_int(row.numbers.get("total"))
    return -1.0 if mismatches is None else mismatches / max(total or 1, 1)


def _num_sort(key: str) -> Callable[[Row], float]:
    def sort(row: Row) -> float:
        value = row.metric(key)
        return -math.inf if value is None or math.isnan(value) else value
    return sort


def _list_text(value: Any) -> str:
    if value in (None, "", []):
        return "—"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return clip(value, 80)


REPORT_COLUMNS: tuple[Column, ...] = (
    Column(key="case", title="case", help="case id",
           text=lambda r: r.case,
           sort=lambda r: natural_key(r.case)),
    Column(key="variant", title="variant", help="knob set (dtype, storage, ...)",
           text=lambda r: r.column,
           sort=lambda r: r.column),
    Column(key="status", title="status", help="verdict (port-stale: a port whose C++ differs in the tree ran it)",
           text=lambda r: r.status + (" (port-stale)" if r.stale else ""),
           sort=lambda r: STATUS_ORDER.index(r.status) if r.status in STATUS_STYLES else -1),
    Column(key="sqnr_db", title="SQNR dB", help="10·log10(Σe² / Σ(a−e)²); ∞ when exact",
           text=lambda r: fmt_num(r.sqnr),
           sort=_num_sort("sqnr_db"),
           numeric=True),
    Column(key="max_abs", title="max |err|", help="largest absolute error over finite elements",
           text=lambda r: fmt_num(r.metric("max_abs")),
           sort=_num_sort("max_abs"),
           numeric=True),
    Column(key="max_rel", title="max rel", help="largest |a−e| / |e|",
           text=lambda r: fmt_num(r.metric("max_rel")),
           sort=_num_sort("max_rel"),
           numeric=True),
    Column(key="mismatches", title="mismatches / total", help="elements over tolerance",
           text=_mismatch_text,
           sort=_mismatch_frac,
           numeric=True),
    Column(key="nan_inf", title="NaN / Inf", help="non-finite outputs where the reference is finite",
           text=lambda r: (f"{as_int(r.numbers.get('nan_count')) or 0} / {as_int(r.numbers.get('inf_count')) or 0}"
                      if (as_int(r.numbers.get("nan_count")) or as_int(r.numbers.get("inf_count"))) else "—"),
           sort=lambda r: (as_int(r.numbers.get("nan_count")) or 0) + (as_int(r.numbers.get("inf_count")) or 0),
           numeric=True),
    Column(key="unwritten", title="unwritten", help="output elements the kernel never wrote",
           text=lambda r: fmt_num(r.numbers.get("unwritten")),
           sort=_num_sort("unwritten"),
           numeric=True),
    Column(key="worst_index", title="worst index", help="index of the largest error / bound",
           text=lambda r: _list_text(r.numbers.get("worst_index")),
           sort=lambda r: str(r.numbers.get("worst_index"))),
    Column(key="first_mismatches", title="first mismatches", help="up to five indices over tolerance",
           text=lambda r: _list_text(r.numbers.get("first_mismatches")),
           sort=lambda r: str(r.numbers.get("first_mismatches"))),
    Column(key="shape_mismatch", title="shape mismatch", help="actual vs expected shape",
           text=lambda r: clip(r.numbers.get("shape_mismatch") or "—", 80),
           sort=lambda r: str(r.numbers.get("shape_mismatch"))),
    Column(key="shader", title="shader", help="ET-VK shader variant that produced the output",
           text=lambda r: str(r.result.shader or "—"),
           sort=lambda r: str(r.result.shader)),
    Column(key="flags", title="flags", help="qualifiers such as polyfilled",
           text=lambda r: ", ".join(as_list(r.result.flags)) or "—",
           sort=lambda r: ",".join(as_list(r.result.flags))),
    Column(key="expectation", title="known", help="known upstream bug (expectation id)",
           text=lambda r: (r.expectation.id or "known") if r.expectation else "—",
           sort=lambda r: r.expectation.id if r.expectation else ""),
    Column(key="seconds", title="seconds", help="wall time of the case on this device",
           text=lambda r: fmt_num(r.result.seconds),
           sort=lambda r: as_float(r.result.seconds) or 0.0,
           numeric=True),
    Column(key="reason", title="reason", help="why the status (first and last 200 characters)",
           text=lambda r: r.reason or "—",
           sort=lambda r: r.reason),
)
"""Every column a report can show, declared once (like ExecuTorch's ``CSV_FIELD_NAMES``)."""

COLUMNS: dict[str, Column] = {c.key: c for c in REPORT_COLUMNS}

TABLE_COLUMNS = ("case", "status", "sqnr_db", "max_abs", "max_rel", "mismatches", "nan_inf", "shader", "reason")
"""Per-device table of non-pass results."""
CARD_KEY_COLUMNS = ("sqnr_db", "max_abs", "max_rel", "mismatches", "nan_inf", "unwritten")
"""Headline numbers of a failure's detail card."""
CARD_COLUMNS = ("worst_index", "first_mismatches", "shape_mismatch", "shader", "flags", "seconds")
"""Further facts in a failure's detail card."""
CROSS_COLUMNS = ("sqnr_db", "max_abs", "mismatches", "nan_inf", "unwritten")
"""Key metrics shown per device on the cross-device page."""


def columns(keys: Sequence[str]) -> list[Column]:
    return [COLUMNS[k] for k in keys]


# --------------------------------------------------------------------------- programs


COMPARISONS: tuple[tuple[str, str], ...] = (("vs_eager", "eager"), ("vs_reference", "reference program"))
"""A program's output comparisons (metrics key, oracle), in the order its verdict reads them: the first recorded one
is judged."""
COMPARISON_COLUMNS = ("max_abs", "max_rel", "sqnr_db", "mismatches", "nan_inf", "unwritten", "worst_index")
"""Metrics of a program's output against each oracle."""
RAW_JSON_KEEP = 100_000
"""Characters kept at each end of a program's raw metrics JSON (the results file holds it whole)."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class ProgramNode:
    """One node of a program's delegates as its ``.nodes.csv`` row holds it, with the record it comes from."""

    row: dict[str, Any]
    """The Inspector-shaped row (``inspector.node_row``): delegate, index, op, runtime ops, source, status, gap."""
    record: dict[str, Any]
    """The node's record in ``metrics["nodes"]``: outputs, scalar arguments, dispatches."""
    first_bad: bool = False
    """The first node, in execution order, whose outputs leave tolerance on its own inputs."""

    @property
    def status(self) -> str:
        """The node's verdict on its own inputs."""
        return str(self.row["status"])

    @property
    def shader(self) -> str:
        """The shader of its compute dispatch (the CSV's ``runtime_ops`` lists the prepack shaders too)."""
        return str(self.record.get("shader") or ", ".join(self.row["runtime_ops"]) or "—")

    @property
    def outputs(self) -> list[dict[str, Any]]:
        """Each output (or mutated state) of the node: its error on the node's own inputs and against the reference
        program, as recorded."""
        return [o for o in self.record.get("outputs") or [] if isinstance(o, dict)]

    @property
    def dispatches(self) -> list[dict[str, Any]]:
        """What the node dispatched (shader, workgroup sizes, spec constants), to rerun it by hand."""
        return [d for d in self.record.get("dispatches") or [] if isinstance(d, dict)]

    @property
    def args(self) -> dict[str, Any]:
        """Its scalar arguments by schema name, which an expectation matched inside a program reads."""
        return as_dict(self.record.get("args"))


@dataclasses.dataclass(kw_only=True, frozen=True)
class NodeColumn:
    """One column of a program's node table, declared once."""

    key: str
    title: str
    help: str
    text: Callable[[ProgramNode], str]
    numeric: bool = False


def _global_text(node: ProgramNode) -> str:
    """The node against the reference program: how far a wrong value upstream carried, beside its own error."""
    value, status = node.row.get("global_max_abs"), node.row.get("global_status") or ""
    return "—" if value is None and not status else f"{fmt_num(value)} {status}".strip()


NODE_COLUMNS: tuple[NodeColumn, ...] = (
    NodeColumn(key="delegate", title="delegate", help="Vulkan delegate (partition), in execution order",
               text=lambda n: str(n.row["delegate"])),
    NodeColumn(key="index", title="node", help="node index in its delegate; node_id and debug handles in the tooltip",
               text=lambda n: str(n.row["index"])),
    NodeColumn(key="op", title="op", help="the node's operator (aot_ops)", text=lambda n: ", ".join(map(str, n.row["aot_ops"]))),
    NodeColumn(key="shader", title="shader", help="shader of its compute dispatch", text=lambda n: n.shader),
    NodeColumn(key="source", title="source line", help="module path and source line (ETRecord)",
               text=lambda n: str(n.row.get("source") or "—")),
    NodeColumn(key="status", title="status", help="the node judged on its own inputs", text=lambda n: n.status),
    NodeColumn(key="gap_max_abs", title="max |err|", help="largest absolute error of its worst output, on its own inputs",
               text=lambda n: fmt_num(n.row.get("gap_max_abs")), numeric=True),
    NodeColumn(key="gap_sqnr_db", title="SQNR dB", help="SQNR of its worst output, on its own inputs",
               text=lambda n: fmt_num(n.row.get("gap_sqnr_db")), numeric=True),
    NodeColumn(key="gap_mismatches", title="mismatches", help="elements of its worst output over tolerance",
               text=lambda n: fmt_num(n.row.get("gap_mismatches")), numeric=True),
    NodeColumn(key="global", title="vs reference",
               help="max |err| against the reference program's value (whole program in float64), and its status",
               text=_global_text, numeric=True),
)
"""The node table of a program's card: the ``.nodes.csv`` columns a reader needs first."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Comparison:
    """A program's output against one oracle: eager PyTorch, or the program evaluated by the references."""

    key: str
    """Metrics key (``vs_eager``)."""
    oracle: str
    """What it is compared with, in words."""
    row: "Row | None"
    """The statistics as a row, so the declared columns read them; None when not compared."""
    judged: bool = False
    """The comparison the verdict reads."""


def _comparisons(row: Row) -> list[Comparison]:
    main = row.output_comparison
    out = []
    for key, oracle in COMPARISONS:
        stats = row.metrics.get(key)
        stats_row = Row.from_result(dataclasses.replace(row.result, metrics=stats)) if isinstance(stats, dict) else None
        out.append(Comparison(key=key, oracle=oracle, row=stats_row, judged=main is not None and main[0] == key))
    return out


def _nodes(row: Row) -> list[ProgramNode]:
    records = [r for r in row.metrics.get("nodes") or [] if isinstance(r, dict) and {"index", "op", "status"} <= set(r)]
    first = next((r for r in records if category(str(r["status"])) == "fail"), None)
    return [ProgramNode(row=node_row(row.result, r), record=r, first_bad=r is first) for r in records]


def _delegates(row: Row) -> list[dict[str, str]]:
    """Each delegate call: its status, the nodes it judged, where and why it stopped when the device could not run it."""
    out = []
    for entry in row.metrics.get("delegates") or []:
        if not isinstance(entry, dict):
            continue
        at = f"node {entry['index']} ({entry.get('op', '')})" if entry.get("index") is not None else ""
        out.append({"delegate": str(entry.get("delegate", "?")), "status": str(entry.get("status", "?")),
                    "nodes": str(entry.get("nodes", "—")), "at": at, "reason": clip(entry.get("reason") or "")})
    return out


@dataclasses.dataclass(kw_only=True)
class ProgramView:
    """What a program's card shows: its output comparisons, its delegates, its node table and first diverging node."""

    comparisons: list[Comparison]
    """Against eager and against the reference program (one row each, recorded or not)."""
    nodes: list[ProgramNode]
    """Every judged node, in execution order."""
    delegates: list[dict[str, str]]
    """Each delegate call (``_delegates``)."""
    route: dict[str, Any]
    """The routing profile the device resolved to."""
    step: int | None
    """The call whose nodes are shown, when the program was called several times."""
    reference_note: str
    """Why there is no reference output, or which delegates torch evaluated instead."""
    raw: str
    """The result's metrics as JSON, for the toggle."""

    @property
    def first_bad(self) -> ProgramNode | None:
        """The node the verdict blames (later nodes fed its value stay unmarked)."""
        return next((n for n in self.nodes if n.first_bad), None)

    @classmethod
    def from_row(cls, row: Row) -> "ProgramView | None":
        """The program parts of a row's metrics; None when it judged no program (a kernel case, a host rule)."""
        metrics = row.metrics
        if not (isinstance(metrics.get("nodes"), list) or any(key in metrics for key, _ in COMPARISONS)):
            return None
        return cls(comparisons=_comparisons(row), nodes=_nodes(row), delegates=_delegates(row),
                   route=as_dict(metrics.get("route")),
                   step=as_int(metrics.get("nodes_step")) if row.steps else None,
                   reference_note=clip(metrics.get("reference_note") or ""),
                   raw=clip(json.dumps(metrics, indent=1, default=str), RAW_JSON_KEEP))


# --------------------------------------------------------------------------- merging


def row_key(result: Result) -> str:
    """What one row stands for: the case, or one rule or node of it (``case/rule``, ``case/#node``)."""
    parts = [str(result.case)]
    if result.rule:
        parts.append(str(result.rule))
    if as_dict(result.node).get("index") is not None:
        parts.append(f"#{result.node['index']}")
    return "/".join(parts)


@dataclasses.dataclass(kw_only=True)
class Merged:
    """All results keyed by (case, device), latest kept."""

    rows: dict[tuple[str, str], Row]
    """Kept rows by (entry, device slug); an entry is a case, or a case's rule or node (``row_key``)."""
    duplicates: Counter
    """Superseded results per device slug."""
    sources: list[str] = dataclasses.field(default_factory=list)
    """Input files, as given."""
    total_read: int = 0
    """Results read, duplicates included."""
    problems: list[LineProblem] = dataclasses.field(default_factory=list)
    """Lines of the input files that could not be read (not UTF-8, not JSON, not an object)."""

    @classmethod
    def from_results(cls, results: Iterable[Result], sources: Sequence[str | os.PathLike] = ()) -> "Merged":
        """One row per verdict key (``merge``: latest by ``time``, ties to the one read last)."""
        read = list(results)
        rows, duplicates = {}, Counter()
        for group in merge(read):
            row = Row.from_result(group[-1])
            row.superseded = group[:-1]
            if row.superseded:
                duplicates[row.device] += len(row.superseded)
            rows[(row_key(group[-1]), row.device)] = row
        return cls(rows=rows, duplicates=duplicates, sources=[str(s) for s in sources], total_read=len(read))

    @classmethod
    def from_paths(cls, paths: Sequence[str | os.PathLike]) -> "Merged":
        paths = list(paths)
        report = read(paths)
        merged = cls.from_results(report.results, sources=paths)
        merged.problems = report.problems
        return merged

    def devices(self) -> list[str]:
        return sorted({device for _, device in self.rows}, key=natural_key)

    def for_device(self, device: str) -> list[Row]:
        return sorted((r for (_, d), r in self.rows.items() if d == device), key=lambda r: natural_key(r.case))

    def by_case(self) -> dict[str, dict[str, Row]]:
        out: dict[str, dict[str, Row]] = defaultdict(dict)
        for (case, device), row in self.rows.items():
            out[case][device] = row
        return out


@dataclasses.dataclass(kw_only=True)
class Bucket:
    """Failing rows that share a signature (``bucket_of``): likely one cause."""

    signature: str
    rows: list[Row]

    @property
    def known(self) -> int:
        return sum(r.known for r in self.rows)

    @property
    def devices(self) -> list[str]:
        return sorted({r.device for r in self.rows}, key=natural_key)


def buckets(rows: Iterable[Row]) -> list[Bucket]:
    """Failing rows grouped by bucket (recorded, or derived for results written before buckets), largest first."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if row.category == "fail":
            groups[row.result.bucket or bucket_of(row.result)].append(row)
    return sorted((Bucket(signature=k, rows=sorted(v, key=lambda r: natural_key(r.case))) for k, v in groups.items()),
                  key=lambda b: (-len(b.rows), b.signature))


def status_counts(rows: Iterable[Row]) -> list[tuple[str, int]]:
    """``(status, count)`` in display order, unknown statuses last."""
    counts = Counter(r.status for r in rows)
    ordered = [(s, counts[s]) for s in STATUS_ORDER if counts.get(s)]
    return ordered + sorted((s, n) for s, n in counts.items() if s not in STATUS_STYLES)
