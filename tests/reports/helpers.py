"""Helpers for report tests: synthetic result lines, a tiny HTML tree, headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars")
ARTIFACTS = Path(__file__).parent / "artifacts"

DEVICE_INFO = {
    "adreno": {"slug": "adreno", "name": "Adreno (TM) 740", "vendor": "Qualcomm", "vendor_id": 0x5143,
               "driver": "Qualcomm 512.744.6", "backend": "Vulkan", "adapter_type": "IntegratedGPU",
               "features": ["shader-f16", "subgroup"], "limits": {"max-buffer-size": 1 << 30}},
    "mali": {"slug": "mali", "name": "Mali-G715", "vendor": "ARM", "vendor_id": 0x13B5, "driver": "r44p0",
             "backend": "Vulkan", "adapter_type": "IntegratedGPU", "features": ["shader-f16"],
             "limits": {"max-buffer-size": 1 << 29}},
}


def result(case: str, device: str, status: str = "PASS", *, time: str = "2026-11-26T02:00:00+00:00",
           **fields: Any) -> dict[str, Any]:
    """One result line as the store writes it; ``case`` like ``linear_q4gsw[M1-K64-N40-g32-fp32-buffer]``.

    Sizes (``M1``) become ``shape``, the last two tokens the knobs ``dtype`` and ``storage``.
    """
    inner = case[case.index("[") + 1:-1] if "[" in case else case
    tokens = inner.split("-")
    variant = "-".join(tokens[-2:])
    shape = {t[0]: int(t[1:]) for t in tokens[:-2] if re.fullmatch(r"[A-Za-z]\d+", t)}
    knobs = dict(zip(("dtype", "storage"), tokens[-2:])) if len(tokens) >= 2 else {}
    failing = status not in ("PASS", "NOT_SUPPORTED", "NOT_RUN", "BUILD_FAIL", "ERROR")
    metrics = {"total": 520, "mismatches": 37 if failing else 0, "max_abs": 0.25 if failing else 1e-7,
               "max_rel": 0.5 if failing else 1e-6, "sqnr_db": 12.5 if failing else 130.0, "nan_count": 0,
               "inf_count": 0, "unwritten": 0, "worst_index": [3, 39] if failing else None,
               "first_mismatches": [[0, 39], [1, 39]] if failing else [], "shape_mismatch": "",
               "error_hist": {"edges": [float(e) for e in range(-8, 5)], "counts": [0, 1, 5, 40, 200, 150, 50,
                              20, 10 if failing else 0, 10 if failing else 0, 17 if failing else 0, 0],
                              "exact": 17}}
    if failing:
        metrics["error_map"] = [[0.1] * 31 + [250.0] for _ in range(13)]
    line = {"case": case, "op": case.split("[")[0], "variant": variant, "knobs": knobs, "shape": shape,
            "device": device, "status": status,
            "reason": "Mismatched elements: 37 / 520 (7.12%)" if failing else "",
            "shader": "linear_q4gsw_tiled_buffer_texture2d_float", "shaders": ["pack_q4_linear_weight_texture2d",
                                                                             "linear_q4gsw_tiled_buffer_texture2d_float"],
            "metrics": metrics if status not in ("NOT_SUPPORTED", "NOT_RUN", "BUILD_FAIL", "ERROR") else {},
            "tolerance": {"atol": 1e-6, "rtol": 1e-5, "acc": 4.0, "eps": 1.1920928955078125e-07},
            "flags": [], "dispatch": {"global": [5, 1, 1], "local": [1, 1, 64], "spec": {"3": 0}},
            "seed": 1234, "repro": f"vkdiff run --cases '^{case}$' --device {device}",
            "versions": {"vkdiff": "0.1.0", "executorch": "1.5.1"}, "device_info": DEVICE_INFO.get(device, {}),
            "seconds": 0.5, "time": time, "schema": 2}
    line.update(fields)
    return line


PROGRAM_NODES = (  # (delegate, index, op, shader, source): two_partitions as `vkdiff check` records it
    (0, 0, "et_vk.linear_q4gsw.default", "q4gsw_linear_gemm__w_4x8_nc_texture3d_float", "encoder, factories.py:23"),
    (0, 1, "aten.tanh.default", "tanh_float_texture3d", "<top>, factories.py:23"),
    (1, 0, "et_vk.prepack.default", "nchw_to_image_texture3d_float_float", "<top>, factories.py:24"),
    (1, 1, "aten.div.Tensor", "binary_div_texture3d_float", "<top>, factories.py:24"),
    (1, 2, "et_vk.linear_q4gsw.default", "q4gsw_linear_gemm__w_4x8_nc_texture3d_float", "head, factories.py:25"),
    (1, 3, "aten.sigmoid.default", "sigmoid_float_texture3d", "<top>, factories.py:25"),
)


def node_record(delegate: int, index: int, op: str, shader: str, source: str, *, bad: bool = False,
                fed_bad: bool = False) -> dict[str, Any]:
    """One node's record in ``metrics["nodes"]`` (``vkdiff.verdicts.nodes.compare_nodes``); ``bad``: over tolerance on
    its own inputs; ``fed_bad``: within tolerance locally, off against the reference program (fed a wrong value)."""
    output = {"value": 5 + 3 * delegate + index, "status": "FAIL_NUMERIC" if bad else "PASS",
              "max_abs": 0.4999 if bad else 2.5e-07, "sqnr_db": 14.17 if bad else "inf", "mismatches": 1 if bad else 0,
              "worst_index": [0, 3] if bad else None, "global_max_abs": 0.5 if bad else 0.1214 if fed_bad else 3e-07,
              "global_status": "FAIL_NUMERIC" if bad or fed_bad else "PASS"}
    return {"delegate": delegate, "index": index, "node_id": index, "debug_handles": [4 * delegate + index + 1],
            "op": op, "source": source, "shader": shader, "args": {"group_size": "32"} if "linear" in op else {},
            "launcher": "Q4gswLinear.cpp" if "linear" in op else "", "status": output["status"], "outputs": [output],
            "host_ms": 0.12, "dispatches": [
                {"shader": "pack_q4_linear_weight__w_4x8_nc_buffer", "global": [16, 4, 1], "local": [16, 4, 1],
                 "spec": {}, "prepack": True, "skipped": False},
                {"shader": shader, "global": [4, 1, 1], "local": [8, 8, 1], "spec": {"3": 1}, "prepack": False,
                 "skipped": False}]}


def comparison(max_abs: float, sqnr_db: float, mismatches: int) -> dict[str, Any]:
    """A program output's ``ErrorStatistics.to_dict()`` as a result records it (``vs_eager``, ``vs_reference``)."""
    return {"arithmetic": {}, "total": 128, "mismatches": mismatches, "max_abs": max_abs, "max_rel": 0.2357,
            "sqnr_db": sqnr_db, "nan_count": 0, "inf_count": 0, "unwritten": 0,
            "worst_index": [3] if mismatches else None, "first_mismatches": [[3]] if mismatches else [],
            "shape_mismatch": "", "error_map": [[801.47] + [0.0002] * 31],
            "error_hist": {"edges": [float(e) for e in range(-8, 5)], "counts": [0, 0, 6, 36, 85, 0, 0, 0, 0, 0, 1, 0],
                           "exact": 0}}


def program_result(case: str, device: str, *, bad: tuple[int, int] | None = (1, 2), eager: bool = True,
                   **fields: Any) -> dict[str, Any]:
    """A program's device result as ``vkdiff check`` writes it: ``bad`` is the (delegate, node) a fault was put in
    (None: a pass); ``eager``: a module was given, so the output is compared with eager too (a ``.pte`` is not)."""
    nodes, hit = [], False
    for delegate, index, op, shader, source in PROGRAM_NODES:
        is_bad = (delegate, index) == bad
        nodes.append(node_record(delegate, index, op, shader, source, bad=is_bad, fed_bad=hit))
        hit = hit or is_bad
    out = comparison(0.1214, 33.42, 1) if bad else comparison(9e-08, 144.7, 0)
    metrics = {"vs_eager": out if eager else None, "vs_reference": out, "nodes": nodes, "nodes_step": 0,
               "delegates": [{"delegate": 0, "nodes": 2, "status": "PASS"},
                             {"delegate": 1, "nodes": 4, "status": "FAIL_NUMERIC" if bad else "PASS"}],
               "reference_note": "", "seconds_build": 0.401, "host_ms_per_node": 3.367,
               "route": {"name": "native", "vendor": "llvmpipe", "subgroup_size": 32, "int8_dot_product": True}}
    line = {"case": case, "op": "two_partitions", "variant": "forward", "rule": "device", "device": device,
            "knobs": {"method": "forward", "route": "native"}, "shape": {},
            "status": "FAIL_NUMERIC" if bad else "PASS",
            "reason": ("first diverging node 2 of delegate 1 (et_vk.linear_q4gsw.default, ...)" if bad
                       else "6 nodes within tolerance"),
            "node": {"index": 2, "op": "et_vk.linear_q4gsw.default", "delegate": 1} if bad else {},
            "shader": "q4gsw_linear_gemm__w_4x8_nc_texture3d_float" if bad else "", "metrics": metrics,
            "tolerance": {"atol": 1e-4, "rtol": 1e-4}, "flags": [], "seed": 0, "device_info": DEVICE_INFO.get(device, {}),
            "versions": {"vkdiff": "0.1.0"}, "seconds": 0.56, "time": "2026-11-26T02:00:00+00:00", "schema": 2}
    line.update(fields)
    return line


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


class Node:
    """An element of a parsed page."""

    def __init__(self, tag: str, attrs: dict[str, str | None], parent: "Node | None"):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    def iter(self) -> Iterator["Node"]:
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list["Node"]:
        return [n for n in self.iter() if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
                and all(n.attrs.get(k.rstrip("_").replace("_", "-")) == v for k, v in attrs.items())]

    def find(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> "Node":
        found = self.find_all(tag, cls, **attrs)
        assert found, f"no <{tag or '*'} class={cls} {attrs}> in page"
        return found[0]


class _TreeBuilder(HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.current)
        self.current.children.append(node)
        if tag not in self.VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, dict(attrs), self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse_html(text: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    return builder.root


def chromium(*args: str, profile: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run headless Chromium with the flags that keep it offline and quiet."""
    return subprocess.run([str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)
