"""A user's ETRecord: which node of which delegate comes from which module and source line.

The devtools resolve a delegate node through the delegate's debug-handle map to the edge
program's nodes. For Vulkan delegates that map names positions in the post-pass
delegate graph (``VkGraphBuilder.process_node`` overwrites ``debug_handle`` before the
map reads it), so it points at unrelated edge nodes. vkdiff therefore lowers the
ETRecord's exported program again with ``VulkanPartitioner`` and the compile options the
``.pte`` stores, watches each delegate being serialized (``vkdiff.lowering.sources``), and
keeps a delegate's sources only when the re-lowered delegate equals the program's byte
for byte (``how="etrecord"``). A delegate that does not reproduce keeps the debug handles
the ETRecord records and no source, with the reason.

ETRecords hold ``torch.export`` artifacts, which torch may unpickle; they are parsed with
``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1``, so nothing but tensors and containers is rebuilt.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

from vkdiff.datamodel import Program
from vkdiff.capture import quiet_libraries
from vkdiff.lowering.edge import LowerError, memoise_vulkan_patterns, stage
from vkdiff.lowering.sources import delegate_sources


class EtrecordError(ValueError):
    """An ETRecord that cannot be read or does not belong to the program (one line)."""


@contextlib.contextmanager
def weights_only() -> Iterator[None]:
    """Every ``torch.load`` inside refuses anything but tensors and plain containers."""
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


def read_etrecord(path: Path) -> Any:
    """executorch's ``parse_etrecord``, unpickling nothing but tensors.

    Raises:
        EtrecordError: not an ETRecord, or one whose artifacts need unsafe unpickling.
    """
    from executorch.devtools.etrecord import parse_etrecord

    try:
        with weights_only(), quiet_libraries():
            return parse_etrecord(str(path))
    except Exception as exc:  # zip, flatbuffer, json and unpickling errors all mean the same to the user
        raise EtrecordError(f"--etrecord {path}: not a readable ETRecord ({type(exc).__name__}: "
                            f"{str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''})") from None


def _delegate_handles(etrecord: Any, program: Program, path: Path) -> dict[str, dict[int, list[int]]]:
    """``"<method>/<delegate index>"`` → ``node_id`` → handles from the ETRecord's delegate map, checked against
    the program's delegate calls."""
    out: dict[str, dict[int, list[int]]] = {}
    for method, table in (etrecord._delegate_map or {}).items():
        plan = program.methods.get(method)
        if plan is None:
            raise EtrecordError(f"--etrecord {path}: maps method {method!r}, which {program.name} does not have")
        for instruction, entry in table.items():
            ins = plan.instructions[int(instruction)] if int(instruction) < len(plan.instructions) else None
            if ins is None or ins.kind != "delegate":
                raise EtrecordError(f"--etrecord {path} does not match {program.name}: instruction {instruction} of "
                                    f"{method!r} is not a delegate call there")
            entry_map = entry.get("delegate_map") or {}
            delegate = plan.delegates[ins.delegate]
            ops = len(delegate.graph.ops) if delegate.graph is not None else None
            if ops is not None and any(int(node) >= ops for node in entry_map):
                raise EtrecordError(f"--etrecord {path} does not match {program.name}: delegate {ins.delegate} has "
                                    f"{ops} nodes, the ETRecord maps node {max(int(n) for n in entry_map)}")
            out[f"{method}/{ins.delegate}"] = {int(k): [int(h) for h in v] for k, v in entry_map.items()}
    return out


def compile_options(program: Program) -> dict[str, Any]:
    """``VulkanPartitioner`` options that produce the compile specs the program's Vulkan delegates store."""
    from executorch.backends.vulkan.vulkan_preprocess import parse_compile_spec
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    specs = next((d.compile_specs for m in program.methods.values() for d in m.delegates if d.vulkan), {})
    options = parse_compile_spec([CompileSpec(key, bytes.fromhex(value)) for key, value in specs.items()])
    limits = [options.pop(f"texture_limits_{axis}", None) for axis in "xyz"]
    if all(limit is not None for limit in limits):
        options["texture_limits"] = tuple(limits)
    return options


def attach_etrecord(program: Program, path: Path) -> list[str]:
    """Set every Vulkan delegate's debug handles from the ETRecord and, where re-lowering its exported program
    reproduces the delegate byte for byte, each node's source. Returns one note per delegate left without sources.

    Raises:
        EtrecordError: unreadable, or it does not match the program.
    """
    etrecord = read_etrecord(path)
    handles = _delegate_handles(etrecord, program, path)
    sources: dict = {}
    if etrecord.exported_program is not None:
        try:
            sources = _relower(etrecord.exported_program, program)
        except LowerError as exc:
            sources = {}
            failure = str(exc)
        else:
            failure = ""
    else:
        failure = "the ETRecord holds no exported program"
    notes = []
    for name, method in program.methods.items():
        for entry in method.delegates:
            key = f"{name}/{entry.index}"
            entry.debug_handles = handles.get(key, entry.debug_handles)
            if not entry.vulkan:
                continue
            if key in sources:
                entry.sources = sources[key]
            else:
                notes.append(f"{key}: no sources: re-lowering the ETRecord's exported program did not reproduce this "
                             f"delegate byte for byte{f' ({failure})' if failure else ''}; ET-VK's debug-handle map "
                             f"names graph positions, so vkdiff does not map through it")
    return notes


def _relower(exported: Any, program: Program) -> dict:
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    memoise_vulkan_patterns()
    with quiet_libraries():
        edge = stage("to_edge_transform_and_lower[vulkan, from the ETRecord]", to_edge_transform_and_lower, exported,
                     partitioner=[VulkanPartitioner(compile_options(program))])
        found, _ = delegate_sources(edge.exported_program().graph_module, program, how="etrecord")
    return found
