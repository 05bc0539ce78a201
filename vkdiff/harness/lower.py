"""Lower model cases exactly as users do: torchao/PT2E quantization → torch.export → ExecuTorch.

Recipes quantize a module in place (torchao configs, PT2E with ``XNNPACKQuantizer``);
partitioners are ``VulkanPartitioner`` (default, ``force_fp16``, buffer storage via a
small ``texture_limits``) and ``XnnpackPartitioner``. Each Vulkan delegate blob
(byte for byte what the ``.pte`` carries) is decoded with the constants of its named
data store. Results are cached on disk,
keyed by (case, recipe, partitioner, factory source, torch/torchao/executorch
versions); the Vulkan pattern graphs are memoised per process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
import logging
import pickle
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

from vkdiff.cases.models import ModelCase
from vkdiff.device.boundary import quiet_stderr
from vkdiff.device.build import cache_dir
from vkdiff.harness.delegate import Delegate, decode
from vkdiff.harness.store import versions

CACHE_SCHEMA = 1


class LowerError(RuntimeError):
    """Lowering failed (→ ``LOWER_FAIL``); the message names the stage or pass."""


@dataclasses.dataclass(kw_only=True)
class LoweredCase:
    """A case after ExecuTorch's full pass stack, as the runtime will see it."""

    case_id: str
    delegates: list[Delegate]
    """Every Vulkan delegate, decoded (empty for XNNPACK lowering)."""
    partitions: int
    """Number of delegate calls in the top-level graph."""
    delegated_ops: dict[str, int]
    """Edge ops inside delegates, before Vulkan's own fusion passes."""
    undelegated_ops: dict[str, int]
    """Edge ops left to the portable CPU runtime."""
    dequantize_dtypes: list[str]
    """Output dtype of every ``dequantize_affine`` in the edge program (delegated or not)."""
    pte: bytes
    """The serialized program."""
    seconds: float
    """Wall time of the lowering that produced this entry (not of a cache hit)."""
    cached: bool = False
    """True when loaded from the on-disk cache."""

    @property
    def pte_size(self) -> int:
        return len(self.pte)

    def op_counts(self) -> Counter:
        """et_vk/aten ops over all delegates, after fusion."""
        total: Counter = Counter()
        for delegate in self.delegates:
            total.update(delegate.op_counts())
        return total


RECIPES: dict[str, Callable[..., Any]] = {}
"""Quantization recipes by name: ``recipe(model, inputs)`` returns the module quantized (PT2E recipes need
the example inputs to export and calibrate; torchao recipes ignore them)."""


def _registrar(table: dict[str, Callable]) -> Callable[[str], Callable[[Callable], Callable]]:
    """A decorator factory that registers functions in ``table`` under a name."""
    def register(name: str) -> Callable[[Callable], Callable]:
        def wrap(fn: Callable) -> Callable:
            table[name] = fn
            return fn
        return wrap
    return register


recipe = _registrar(RECIPES)


@recipe("fp32")
def _fp32(model, inputs=None):
    """No quantization: the float model as is."""
    return model


@recipe("8da4w")
def _8da4w(model, inputs=None, group_size: int = 32):
    import torch
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, PerGroup, quantize_

    quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4,
                                                           weight_granularity=PerGroup(group_size)))
    return model


@recipe("8da4w-fp32zp")
def _8da4w_fp32zp(model, inputs=None, group_size: int = 32):
    """torchao's ``Int8DynActInt4WeightQuantizer``: per-token zero points allocated as float32 (TISO-style)."""
    from torchao.quantization import Int8DynActInt4WeightQuantizer

    return Int8DynActInt4WeightQuantizer(groupsize=group_size).quantize(model)


def _intx_weight_only(model, *, granularity, asymmetric: bool = False, embeddings: bool = False):
    import torch
    from torchao.quantization import IntxWeightOnlyConfig, MappingType, quantize_

    mapping = MappingType.ASYMMETRIC if asymmetric else MappingType.SYMMETRIC
    config = IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=granularity, mapping_type=mapping)
    wanted = torch.nn.Embedding if embeddings else torch.nn.Linear
    quantize_(model, config, filter_fn=lambda module, fqn: isinstance(module, wanted))
    return model


@recipe("4w")
def _4w(model, inputs=None, group_size: int = 32):
    from torchao.quantization import PerGroup

    return _intx_weight_only(model, granularity=PerGroup(group_size))


@recipe("4w-asym")
def _4w_asym(model, inputs=None, group_size: int = 32):
    from torchao.quantization import PerGroup

    return _intx_weight_only(model, granularity=PerGroup(group_size), asymmetric=True)


@recipe("emb4w")
def _emb4w(model, inputs=None, group_size: int = 32):
    from torchao.quantization import PerGroup

    return _intx_weight_only(model, granularity=PerGroup(group_size), embeddings=True)


@recipe("emb4w-perrow")
def _emb4w_perrow(model, inputs=None):
    from torchao.quantization import PerAxis

    return _intx_weight_only(model, granularity=PerAxis(0), embeddings=True)


@recipe("emb4w-asym")
def _emb4w_asym(model, inputs=None, group_size: int = 32):
    from torchao.quantization import PerGroup

    return _intx_weight_only(model, granularity=PerGroup(group_size), asymmetric=True, embeddings=True)


@recipe("emb4w+4w")
def _emb4w_and_4w(model, inputs=None, group_size: int = 32):
    """Tied embedding / lm_head: both the embedding and the linear quantized 4-bit group-wise."""
    return _4w(_emb4w(model, inputs, group_size), inputs, group_size)


@recipe("pt2e-xnnpack")
def _pt2e_xnnpack(model, inputs):
    """PT2E with ``XNNPACKQuantizer`` (symmetric config), calibrated on the example inputs."""
    from vkdiff.harness.pt2e import quantize_pt2e_xnnpack

    return quantize_pt2e_xnnpack(model, inputs)


def _bf16_checkpoint(model, inputs, quantize: Callable, unwrap: bool):
    """export_llama's bf16 path: load as bf16, quantize in bf16, then ``.to(torch.float32)``."""
    import torch

    model = quantize(model.to(torch.bfloat16), inputs).to(torch.float32)
    if unwrap:
        from torchao.utils import unwrap_tensor_subclass

        model = unwrap_tensor_subclass(model)
    return model


for _name, _quantize in (("4w", _4w), ("8da4w", _8da4w)):
    for _unwrap in (False, True):
        RECIPES[f"{_name}-bf16{'-unwrap' if _unwrap else ''}"] = functools.partial(
            _bf16_checkpoint, quantize=_quantize, unwrap=_unwrap)


PARTITIONERS: dict[str, Callable[[], list]] = {}


partitioner = _registrar(PARTITIONERS)


@partitioner("vulkan")
def _vulkan():
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

    return [VulkanPartitioner({})]


@partitioner("vulkan-fp16")
def _vulkan_fp16():
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

    return [VulkanPartitioner({"force_fp16": True})]


@partitioner("vulkan-buffer")
def _vulkan_buffer():
    """A tiny texture limit makes every tensor fall back to buffer storage."""
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

    return [VulkanPartitioner({"texture_limits": (4, 4, 4)})]


@partitioner("xnnpack")
def _xnnpack():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return [XnnpackPartitioner()]


@functools.lru_cache(maxsize=None)
def memoise_vulkan_patterns() -> None:
    """Memoise every Vulkan pattern's ``get_graphs_fn`` (the RoPE patterns re-export on each call)."""
    from executorch.backends.vulkan.patterns import fusable_patterns

    for entry in fusable_patterns.values():
        if entry.get_graphs_fn is not None:
            entry.get_graphs_fn = functools.lru_cache(maxsize=None)(entry.get_graphs_fn)


def cache_key(case: ModelCase) -> str:
    """Identity of a lowering: case, recipe, partitioner, factory source and library versions."""
    source = inspect.getsource(case.build) if callable(case.build) else repr(case.build)
    ver = versions()
    parts = [case.id, case.recipe, case.partitioner, case.pipeline, repr(case.knobs), source, ver["torch"],
             ver["torchao"], ver["executorch"], str(CACHE_SCHEMA), _own_source_hash()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


@functools.lru_cache(maxsize=None)
def _own_source_hash() -> str:
    """Lowering and decoding code is part of the key: changing it invalidates the cache."""
    from vkdiff.harness import delegate

    here = Path(__file__).parent
    sources = [Path(__file__), Path(delegate.__file__), here / "llm_export.py", here / "pt2e.py",
               here.parent / "cases" / "llm.py"]
    return hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]


def lower(case: ModelCase, *, use_cache: bool = True) -> LoweredCase:
    """Lower ``case`` (or load it from the cache).

    Raises:
        LowerError: a stage failed; the message names the stage (and pass when known).
    """
    path = cache_dir() / "lowered" / f"{cache_key(case)}.pkl"
    if use_cache and path.exists():
        with open(path, "rb") as handle:
            lowered = pickle.load(handle)
        lowered.cached = True
        return lowered
    lowered = _lower_uncached(case)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{id(lowered)}")
    with open(tmp, "wb") as handle:
        pickle.dump(lowered, handle, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)
    return lowered


def _stage(name: str, fn: Callable, *args, **kwargs):
    """Run one lowering stage; failures become LowerError naming the stage and the failing pass."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        root = _root_cause(exc)
        cause = f" | cause: {type(root).__name__}: {str(root).strip()[:300]}" if root is not exc else ""
        raise LowerError(f"{name}: {_failing_pass(exc)}{type(exc).__name__}: {str(exc).strip()[:300]}{cause}") from exc


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of a chain (ExecuTorch wraps pass failures in a generic Exception)."""
    seen = {id(exc)}
    while (nxt := exc.__cause__ or exc.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        exc = nxt
    return exc


def _failing_pass(exc: BaseException) -> str:
    """Name the ExecuTorch pass in the traceback, when there is one (``FusePatternsPass: ``)."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if "/executorch/" in frame.filename and ("_passes" in frame.filename or "passes" in frame.filename):
            return f"{Path(frame.filename).stem}.{frame.name}: "
    return ""


@contextlib.contextmanager
def quiet_libraries() -> Iterator[list[str]]:
    """Keep torch/torchao/executorch chatter (warnings, INFO logs, native fd-2 prints) out of vkdiff's output.

    Yields the list of captured native stderr lines (kept for diagnostics).
    """
    with quiet_stderr() as captured, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        previous = logging.root.manager.disable
        logging.disable(logging.INFO)
        try:
            yield captured
        finally:
            logging.disable(previous)


def _lower_uncached(case: ModelCase) -> LoweredCase:
    with quiet_libraries():
        if case.pipeline == "export_llama":
            from vkdiff.harness.llm_export import lower_llm

            return lower_llm(case)
        return _lower_steps(case)


def _lower_steps(case: ModelCase) -> LoweredCase:
    import torch
    from executorch.exir import to_edge_transform_and_lower

    start = time.perf_counter()
    memoise_vulkan_patterns()
    model, inputs = _stage("build", case.instantiate)
    model = _stage(f"quantize[{case.recipe}]", RECIPES[case.recipe], model, inputs)
    program = _stage("export", torch.export.export, model, inputs)
    edge = _stage(f"to_edge_transform_and_lower[{case.partitioner}]", to_edge_transform_and_lower, program,
                  partitioner=PARTITIONERS[case.partitioner]())
    gm = edge.exported_program().graph_module
    delegates = _stage("preprocess", _decoded_delegates, gm)
    pte = _stage("to_executorch", lambda: edge.to_executorch().buffer)
    top = _call_targets(gm)
    inner = Counter()
    for _, sub in _lowered_modules(gm):
        inner.update(_call_targets(sub.original_module.graph_module))
    return LoweredCase(case_id=case.id, delegates=delegates,
                       partitions=top.pop("higher_order.executorch_call_delegate", 0),
                       delegated_ops=dict(inner), undelegated_ops=dict(top),
                       dequantize_dtypes=_dequantize_dtypes(gm), pte=pte,
                       seconds=round(time.perf_counter() - start, 3))


def _lowered_modules(gm) -> list[tuple[str, Any]]:
    return [(n, m) for n, m in gm.named_children() if n.startswith("lowered_module")]


def _decoded_delegates(gm) -> list[Delegate]:
    """Decode each Vulkan delegate blob as it goes into the .pte, with the constants of its named data store."""
    return [decode(module.processed_bytes, module.named_data_store_output)
            for _, module in _lowered_modules(gm) if module.backend_id == "VulkanBackend"]


def _target_name(target: Any) -> str:
    name = getattr(target, "__name__", None) or str(target)
    if hasattr(target, "_schema"):
        return str(target._schema.name).replace("::", ".") + "." + (target._overloadname or "default")
    if hasattr(target, "namespace"):
        return f"{target.namespace}.{name}"
    return f"torch.ops.higher_order.{name}" if "executorch_call_delegate" in name else name


def _call_targets(gm) -> Counter:
    counts: Counter = Counter()
    for node in gm.graph.nodes:
        if node.op == "call_function" and "getitem" not in str(node.target):
            counts[_target_name(node.target)] += 1
    return counts


def _dequantize_dtypes(gm) -> list[str]:
    """Output dtype of every dequantize_affine, inside delegates and out."""
    graphs = [gm] + [m.original_module.graph_module for _, m in _lowered_modules(gm)]
    dtypes = []
    for graph in graphs:
        for node in graph.graph.nodes:
            if node.op == "call_function" and "dequantize_affine" in str(node.target):
                value = node.meta.get("val")
                dtypes.append(str(getattr(value, "dtype", "unknown")).replace("torch.", ""))
    return dtypes
