"""Stages of a lowering and what vkdiff reads off an edge program: delegates, op counts, dequantize dtypes.

Shared by both pipelines (``vkdiff.lowering.lower`` for ``to_edge_transform_and_lower``,
``vkdiff.lowering.llm_export`` for ``export_llama``): a ``LowerError`` names the failing
stage and ExecuTorch pass, ``LoweredCase`` is what either produces.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import traceback
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

from vkdiff.datamodel import Delegate, Program, Source
from vkdiff.lowering.sources import delegate_sources
from vkdiff.program import pte as pte_reader


class LowerError(RuntimeError):
    """Lowering failed (→ ``LOWER_FAIL``); the message names the stage or pass."""


@dataclasses.dataclass(kw_only=True)
class LoweredCase:
    """A case after ExecuTorch's full pass stack, as the runtime will see it: the ``.pte`` and what the edge program
    showed on the way (all plain data: the lowering cache stores it as the ``.pte`` plus JSON)."""

    case_id: str
    pte: bytes
    """The serialized program."""
    partitions: int
    """Number of delegate calls in the top-level graph."""
    delegated_ops: dict[str, int]
    """Edge ops inside delegates, before Vulkan's own fusion passes."""
    undelegated_ops: dict[str, int]
    """Edge ops left to the portable CPU runtime."""
    dequantize_dtypes: list[str]
    """Output dtype of every ``dequantize_affine`` in the edge program (delegated or not)."""
    seconds: float
    """Wall time of the lowering that produced this entry (not of a cache hit)."""
    sources: dict[str, dict[int, Source]] = dataclasses.field(default_factory=dict)
    """``"<method>/<delegate index>"`` → op index → where the node comes from (``vkdiff.lowering.sources``)."""
    debug_handles: dict[str, dict[int, list[int]]] = dataclasses.field(default_factory=dict)
    """``"<method>/<delegate index>"`` → ``node_id`` → debug handles, as ET-VK's debug-handle map records them."""
    cached: bool = False
    """True when loaded from the on-disk cache."""
    _program: Program | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

    @property
    def pte_size(self) -> int:
        return len(self.pte)

    def program(self) -> Program:
        """The ``.pte`` decoded (once), with node sources and debug handles attached."""
        if self._program is None:
            program = pte_reader.load_pte(self.pte, self.case_id)
            for name, method in program.methods.items():
                for entry in method.delegates:
                    entry.sources = self.sources.get(f"{name}/{entry.index}", {})
                    entry.debug_handles = self.debug_handles.get(f"{name}/{entry.index}", {})
            self._program = program
        return self._program

    @property
    def delegates(self) -> list[Delegate]:
        """Every Vulkan delegate of every method, decoded (empty for an XNNPACK lowering)."""
        return [entry.graph for method in self.program().methods.values() for entry in method.delegates
                if entry.graph is not None]

    def op_counts(self) -> Counter:
        """et_vk/aten ops over all delegates, after fusion."""
        total: Counter = Counter()
        for delegate in self.delegates:
            total.update(delegate.op_counts())
        return total

    def to_json(self) -> dict[str, Any]:
        """Everything but the ``.pte`` bytes, as JSON."""
        return {"case_id": self.case_id, "partitions": self.partitions, "delegated_ops": self.delegated_ops,
                "undelegated_ops": self.undelegated_ops, "dequantize_dtypes": self.dequantize_dtypes,
                "seconds": self.seconds,
                "sources": {k: {str(i): dataclasses.asdict(s) for i, s in v.items()} for k, v in self.sources.items()},
                "debug_handles": {k: {str(i): h for i, h in v.items()} for k, v in self.debug_handles.items()}}

    @classmethod
    def from_json(cls, doc: dict[str, Any], pte: bytes) -> "LoweredCase":
        """Rebuild from ``to_json`` and the ``.pte`` (raises ``KeyError``/``TypeError`` on a malformed document)."""
        sources = {k: {int(i): Source(**s) for i, s in v.items()} for k, v in doc["sources"].items()}
        handles = {k: {int(i): [int(x) for x in h] for i, h in v.items()} for k, v in doc["debug_handles"].items()}
        return cls(case_id=str(doc["case_id"]), pte=pte, partitions=int(doc["partitions"]),
                   delegated_ops={str(k): int(v) for k, v in doc["delegated_ops"].items()},
                   undelegated_ops={str(k): int(v) for k, v in doc["undelegated_ops"].items()},
                   dequantize_dtypes=[str(d) for d in doc["dequantize_dtypes"]], seconds=float(doc["seconds"]),
                   sources=sources, debug_handles=handles, cached=True)


@functools.lru_cache(maxsize=None)
def memoise_vulkan_patterns() -> None:
    """Memoise every Vulkan pattern's ``get_graphs_fn`` (the RoPE patterns re-export on each call)."""
    from executorch.backends.vulkan.patterns import fusable_patterns

    for entry in fusable_patterns.values():
        if entry.get_graphs_fn is not None:
            entry.get_graphs_fn = functools.lru_cache(maxsize=None)(entry.get_graphs_fn)


def stage(name: str, fn: Callable, *args, **kwargs):
    """Run one lowering stage; failures become LowerError naming the stage and the failing pass."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        root = root_cause(exc)
        cause = f" | cause: {type(root).__name__}: {str(root).strip()[:300]}" if root is not exc else ""
        raise LowerError(f"{name}: {failing_pass(exc)}{type(exc).__name__}: {str(exc).strip()[:300]}{cause}") from exc


def root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of a chain (ExecuTorch wraps pass failures in a generic Exception)."""
    seen = {id(exc)}
    while (nxt := exc.__cause__ or exc.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        exc = nxt
    return exc


def failing_pass(exc: BaseException) -> str:
    """Name the ExecuTorch pass in the traceback, when there is one (``FusePatternsPass: ``)."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if "/executorch/" in frame.filename and ("_passes" in frame.filename or "passes" in frame.filename):
            return f"{Path(frame.filename).stem}.{frame.name}: "
    return ""


def lowered_modules(gm) -> list[tuple[str, Any]]:
    return [(n, m) for n, m in gm.named_children() if n.startswith("lowered_module")]


def target_name(target: Any) -> str:
    name = getattr(target, "__name__", None) or str(target)
    if hasattr(target, "_schema"):
        return str(target._schema.name).replace("::", ".") + "." + (target._overloadname or "default")
    if hasattr(target, "namespace"):
        return f"{target.namespace}.{name}"
    return f"torch.ops.higher_order.{name}" if "executorch_call_delegate" in name else name


def call_targets(gm) -> Counter:
    counts: Counter = Counter()
    for node in gm.graph.nodes:
        if node.op == "call_function" and "getitem" not in str(node.target):
            counts[target_name(node.target)] += 1
    return counts


def dequantize_dtypes(gm) -> list[str]:
    """Output dtype of every dequantize_affine, inside delegates and out."""
    graphs = [gm] + [m.original_module.graph_module for _, m in lowered_modules(gm)]
    dtypes = []
    for graph in graphs:
        for node in graph.graph.nodes:
            if node.op == "call_function" and "dequantize_affine" in str(node.target):
                value = node.meta.get("val")
                dtypes.append(str(getattr(value, "dtype", "unknown")).replace("torch.", ""))
    return dtypes


def attach_sources(lowered: LoweredCase, gm: Any) -> LoweredCase:
    """Record where each delegate node comes from (re-running ``preprocess`` on each lowered module)."""
    lowered.sources, lowered.debug_handles = stage("sources", delegate_sources, gm, lowered.program())
    lowered._program = None
    return lowered


@contextlib.contextmanager
def weights_only() -> Iterator[None]:
    """Every ``torch.load`` inside refuses anything but tensors and plain containers, whatever the environment says
    (ExecuTorch's own loaders, an ETRecord's artifacts or export_llama's checkpoint, may pass no ``weights_only``)."""
    saved = {k: os.environ.get(k) for k in ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")}
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
