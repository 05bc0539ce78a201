"""Lower model cases exactly as users do: torchao/PT2E quantization → torch.export → ExecuTorch.

Recipes and partitioners come from ``vkdiff.lowering.recipes``; ``export_llama`` cases go
through ``vkdiff.lowering.llm_export``. Each Vulkan delegate blob
(byte for byte what the ``.pte`` carries) is decoded with the constants of its named
data store. Results are cached on disk,
keyed by (case, recipe, partitioner, factory source, torch/torchao/executorch
versions); the Vulkan pattern graphs are memoised per process.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import pickle
import time
from collections import Counter
from pathlib import Path

from vkdiff.cases.model_case import ModelCase
from vkdiff.datamodel import CacheCorruptError, cache_dir, read_entry, record_repair, versions, write_entry
from vkdiff.lowering.edge import (LoweredCase, call_targets, decoded_delegates, dequantize_dtypes,
                                 lowered_modules, memoise_vulkan_patterns, quiet_libraries, stage)
from vkdiff.lowering.llm_export import lower_llm
from vkdiff.lowering.recipes import PARTITIONERS, RECIPES

CACHE_SCHEMA = 2


def cache_key(case: ModelCase) -> str:
    """Identity of a lowering: case, recipe, partitioner, factory source and library versions."""
    source = inspect.getsource(case.build) if callable(case.build) else repr(case.build)
    ver = versions()
    parts = [case.id, case.recipe, case.partitioner, case.pipeline, repr(case.options), source, ver["torch"],
             ver["torchao"], ver["executorch"], str(CACHE_SCHEMA), _own_source_hash(), vulkan_python_hash()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


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
    path = cache_dir() / "lowered" / f"{cache_key(case)}.pkl"
    if use_cache:
        try:
            lowered = pickle.loads(read_entry(path))
            lowered.cached = True
            return lowered
        except FileNotFoundError:
            pass
        except (CacheCorruptError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
            error = exc if isinstance(exc, CacheCorruptError) else CacheCorruptError(path, f"unpickling: {exc}")
            record_repair(error)
            path.unlink(missing_ok=True)
    lowered = _lower_uncached(case)
    write_entry(path, pickle.dumps(lowered, protocol=pickle.HIGHEST_PROTOCOL))
    return lowered


def _lower_uncached(case: ModelCase) -> LoweredCase:
    with quiet_libraries():
        if case.pipeline == "export_llama":
            return lower_llm(case)
        return _lower_steps(case)


def _lower_steps(case: ModelCase) -> LoweredCase:
    import torch
    from executorch.exir import to_edge_transform_and_lower

    start = time.perf_counter()
    memoise_vulkan_patterns()
    model, inputs = stage("build", case.instantiate)
    model = stage(f"quantize[{case.recipe}]", RECIPES[case.recipe], model, inputs)
    program = stage("export", torch.export.export, model, inputs)
    edge = stage(f"to_edge_transform_and_lower[{case.partitioner}]", to_edge_transform_and_lower, program,
                 partitioner=PARTITIONERS[case.partitioner]())
    gm = edge.exported_program().graph_module
    delegates = stage("preprocess", decoded_delegates, gm)
    pte = stage("to_executorch", lambda: edge.to_executorch().buffer)
    top = call_targets(gm)
    inner = Counter()
    for _, sub in lowered_modules(gm):
        inner.update(call_targets(sub.original_module.graph_module))
    return LoweredCase(case_id=case.id, delegates=delegates,
                       partitions=top.pop("higher_order.executorch_call_delegate", 0),
                       delegated_ops=dict(inner), undelegated_ops=dict(top),
                       dequantize_dtypes=dequantize_dtypes(gm), pte=pte,
                       seconds=round(time.perf_counter() - start, 3))


