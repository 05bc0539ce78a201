"""Lower model cases exactly as users do: torchao/PT2E quantization → torch.export → ExecuTorch.

Recipes and partitioners come from ``vkdiff.lowering.recipes``; ``export_llama`` cases go
through ``vkdiff.lowering.llm_export``. A lowering is cached on disk as data (the ``.pte``
plus a JSON document, each a verified entry) under a key made of its content: the float
module exported with its example inputs (graph code, signature, every parameter, buffer
and constant), the recipe, partitioner and options, the library versions and the Python
of ``backends/vulkan``; never the source text of the function that built the module. The
Vulkan pattern graphs are memoised per process.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections import Counter
from pathlib import Path

from vkdiff.cases.model_case import ModelCase
from vkdiff.datamodel import CacheCorruptError, cache_dir, read_entry, record_repair, versions, write_entry
from vkdiff.capture import quiet_libraries
from vkdiff.lowering.edge import (LoweredCase, attach_sources, call_targets, dequantize_dtypes, lowered_modules,
                                  memoise_vulkan_patterns, stage)
from vkdiff.lowering.llm_export import lower_llm
from vkdiff.lowering.recipes import PARTITIONERS, RECIPES

CACHE_SCHEMA = 3
_KEYS: dict[tuple, str] = {}
"""Content keys computed in this process, by the case's identity (an export per case and process)."""


def cache_key(case: ModelCase) -> str:
    """Identity of a lowering: the exported float program and its data, recipe, partitioner, versions.

    Raises:
        LowerError: the module cannot be built or exported (the lowering would fail the same way).
    """
    memo = (case.id, id(case.build), id(case.inputs), case.recipe, case.partitioner, repr(case.options))
    if memo not in _KEYS:
        ver = versions()
        parts = [case.recipe, case.partitioner, case.pipeline, repr(case.options), _content(case), ver["torch"],
                 ver["torchao"], ver["executorch"], str(CACHE_SCHEMA), _own_source_hash(), vulkan_python_hash()]
        _KEYS[memo] = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    return _KEYS[memo]


def _content(case: ModelCase) -> str:
    """sha256 of what the module computes: its export (graph, signature, parameters, buffers, constants) and inputs.

    ``export_llama`` cases are defined by their options (params, export lengths, checkpoint seed and dtype).
    """
    if case.pipeline == "export_llama":
        return hashlib.sha256(repr(case.options).encode()).hexdigest()
    import torch

    with quiet_libraries():
        model, inputs = stage("build", case.instantiate)
        program = stage("export", torch.export.export, model, inputs, dynamic_shapes=case.dynamic_shapes)
    digest = hashlib.sha256()
    digest.update(program.graph_module.code.encode())
    digest.update(str(program.graph_signature).encode() + str(program.range_constraints).encode())
    tensors = {**program.state_dict, **program.constants,
               **{f"input.{i}": x for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}}
    for name in sorted(tensors):
        value = tensors[name]
        if isinstance(value, torch.Tensor):
            data = value.detach().contiguous().cpu()
            digest.update(f"{name} {data.dtype} {tuple(data.shape)}".encode())
            digest.update(data.view(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b"")
        else:
            digest.update(f"{name} {value!r}".encode())
    return digest.hexdigest()




@functools.lru_cache(maxsize=None)
def _own_source_hash() -> str:
    """Lowering and decoding code is part of the key: changing it invalidates the cache."""
    here, package = Path(__file__).parent, Path(__file__).parents[1]
    sources = [*sorted(here.glob("*.py")), package / "program" / "delegate.py", package / "datamodel" / "vkgraph.py",
               package / "cases" / "llm.py"]
    return hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]


@functools.lru_cache(maxsize=None)
def vulkan_python_hash(root: Path | None = None) -> str:
    """Hash of the Python of ``backends/vulkan`` (the imported one when ``root`` is None; tests excluded).

    Part of the lowering key: a bisect re-lowers with a revision's passes in place of the installed ones.
    """
    if root is None:
        import executorch.backends.vulkan as vulkan

        root = Path(vulkan.__file__).parent
    sources = sorted(p for p in root.rglob("*.py") if "test" not in p.relative_to(root).parts)
    digest = hashlib.sha256()
    for path in sources:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def lower(case: ModelCase, *, use_cache: bool = True) -> LoweredCase:
    """Lower ``case`` (or load it from the cache, verified; a corrupt entry is discarded and lowered again).

    Raises:
        LowerError: a stage failed; the message names the stage (and pass when known).
    """
    stem = cache_dir() / "lowered" / cache_key(case)
    pte_path, doc_path = stem.with_suffix(".pte"), stem.with_suffix(".json")
    if use_cache:
        try:
            return LoweredCase.from_json(json.loads(read_entry(doc_path)), read_entry(pte_path))
        except FileNotFoundError:
            pass
        except (CacheCorruptError, ValueError, KeyError, TypeError) as exc:
            record_repair(exc if isinstance(exc, CacheCorruptError) else CacheCorruptError(doc_path, f"document: {exc}"))
            pte_path.unlink(missing_ok=True)
            doc_path.unlink(missing_ok=True)
    lowered = _lower_uncached(case)
    write_entry(pte_path, lowered.pte)
    write_entry(doc_path, json.dumps(lowered.to_json(), sort_keys=True).encode())
    return lowered


def _lower_uncached(case: ModelCase) -> LoweredCase:
    with quiet_libraries():
        if case.pipeline == "export_llama":
            return lower_llm(case)
        return _lower_steps(case)


def _edge(case: ModelCase, model, inputs):
    """The edge program: the case's recipe, export and partitioner, or an upstream test's own lowering helper."""
    import torch
    from executorch.exir import to_edge_transform_and_lower

    if case.pipeline == "upstream":
        return stage("upstream lowering helper", case.lower_with, model, inputs, case.dynamic_shapes)
    model = stage(f"quantize[{case.recipe}]", RECIPES[case.recipe], model, inputs)
    program = stage("export", torch.export.export, model, inputs, dynamic_shapes=case.dynamic_shapes)
    return stage(f"to_edge_transform_and_lower[{case.partitioner}]", to_edge_transform_and_lower, program,
                 partitioner=PARTITIONERS[case.partitioner]())


def _lower_steps(case: ModelCase) -> LoweredCase:
    start = time.perf_counter()
    memoise_vulkan_patterns()
    model, inputs = stage("build", case.instantiate)
    edge = _edge(case, model, inputs)
    gm = edge.exported_program().graph_module
    pte = stage("to_executorch", lambda: edge.to_executorch().buffer)
    top = call_targets(gm)
    inner = Counter()
    for _, sub in lowered_modules(gm):
        inner.update(call_targets(sub.original_module.graph_module))
    lowered = LoweredCase(case_id=case.id, pte=pte, partitions=top.pop("higher_order.executorch_call_delegate", 0),
                          delegated_ops=dict(inner), undelegated_ops=dict(top),
                          dequantize_dtypes=dequantize_dtypes(gm), seconds=round(time.perf_counter() - start, 3))
    return attach_sources(lowered, gm)
