"""The per-node comparison as a table shaped like the devtools Inspector's numeric-gap frame.

``Inspector.calculate_numeric_gap`` gives one row per matched operator: ``aot_ops``,
``aot_intermediate_output``, ``runtime_ops``, ``runtime_intermediate_output`` and ``gap``;
for a Vulkan delegate it has one row for the whole ``executorch_call_delegate``. Here each
delegate node is a row, keyed by the delegate's debug identifier (``node_id``) and the
debug handles its map records: the AOT side is vkdiff's reference op on the device's own
inputs (``aot_ops``: the op and where it comes from), the runtime side what the device ran
(``runtime_ops``: the shaders), and the gap is the local error (max abs, SQNR, elements
over tolerance) with the global error beside it. Written as CSV and JSON: no new
dependency, readable by pandas the way the Inspector's frame is.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Iterable

from vkdiff.datamodel import Result

COLUMNS = ("case", "device", "step", "delegate", "node_id", "debug_handles", "index", "aot_ops", "source",
           "runtime_ops", "status", "gap_max_abs", "gap_sqnr_db", "gap_mismatches", "global_max_abs", "global_status")
"""The table's columns, in order (declared once)."""


def _size(value: Any) -> float:
    """An error as a number to rank by (the store writes inf/nan as strings; NaN and junk rank lowest)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return -1.0
    return number if number == number else -1.0


def worst_output(record: dict[str, Any]) -> dict[str, Any]:
    """The output (or state) of a node record that shows its gap: a failing one first, then the largest error."""
    outputs = [o for o in record.get("outputs") or [] if isinstance(o, dict)] or [{}]
    return max(outputs, key=lambda o: (o.get("status", "PASS") != "PASS", _size(o.get("max_abs"))))


def runtime_ops(record: dict[str, Any]) -> list[str]:
    """The shaders a node record dispatched (prepack included), the Inspector's runtime side."""
    dispatches = [d for d in record.get("dispatches") or [] if isinstance(d, dict)]
    return sorted({str(d.get("shader", "")) for d in dispatches if not d.get("skipped")} - {""})


def node_row(result: Result, record: dict[str, Any]) -> dict[str, Any]:
    """One node record of a result as a row of the table (``COLUMNS``)."""
    metrics = result.metrics or {}
    worst = worst_output(record)
    return {"case": result.case, "device": result.device, "step": metrics.get("nodes_step", 0),
            "delegate": record.get("delegate", 0), "node_id": record.get("node_id", ""),
            "debug_handles": record.get("debug_handles", []), "index": record["index"],
            "aot_ops": [record["op"]], "source": record.get("source", ""), "runtime_ops": runtime_ops(record),
            "status": record["status"], "gap_max_abs": worst.get("max_abs"),
            "gap_sqnr_db": worst.get("sqnr_db"), "gap_mismatches": worst.get("mismatches"),
            "global_max_abs": worst.get("global_max_abs"), "global_status": worst.get("global_status", "")}


def rows(results: Iterable[Result]) -> list[dict[str, Any]]:
    """One row per node of every device result that judged nodes."""
    return [node_row(result, record) for result in results for record in (result.metrics or {}).get("nodes") or []]


def to_csv(table: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
    writer.writeheader()
    for row in table:
        writer.writerow({k: ";".join(map(str, v)) if isinstance(v, list) else v for k, v in row.items()})
    return buffer.getvalue()


def write(results: Iterable[Result], stem: Path) -> list[Path]:
    """``<stem>.csv`` and ``<stem>.json`` (``stem`` a path without suffix, such as ``run.nodes``); the paths
    written (none when no result judged nodes)."""
    table = rows(results)
    if not table:
        return []
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = stem.parent / f"{stem.name}.csv", stem.parent / f"{stem.name}.json"
    csv_path.write_text(to_csv(table))
    json_path.write_text(json.dumps({"columns": COLUMNS, "rows": table}, indent=1, default=str))
    return [csv_path, json_path]
