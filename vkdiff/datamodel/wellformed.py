"""A decoded program checked before anything runs it: ids in range, kinds and sizes sane, memory within budget.

A ``.pte`` or an artifact from elsewhere decodes into records whose fields are only as
good as the bytes: a value id past the table, a negative or 2**31-wide size, a constant
shorter than its tensor, a list of the wrong kind. The executors trust the records, so
every field they index by is checked here once, and a bad one is one
``ProgramFormatError`` line naming the method, delegate and value. The host memory a
program makes vkdiff hold (every tensor once as stored and once as a float64 reference)
is compared with the budget (``vkdiff.datamodel.budget``) before any input is drawn.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import numpy as np

from vkdiff.datamodel.budget import check_budget
from vkdiff.datamodel.program import FRAME_FIELDS, SCALAR_TYPES, VULKAN_BACKEND, Method, Program, ProgramFormatError
from vkdiff.datamodel.text import one_line
from vkdiff.datamodel.schemas import SchemaError, UnknownOpError, schema_of
from vkdiff.datamodel.vkgraph import MEMORY_LAYOUTS, STORAGE_TYPES, VK_DTYPES, Delegate

DTYPES = frozenset(SCALAR_TYPES.values()) | {np.dtype(t).name for t in VK_DTYPES.values()}
"""Dtype names a program's tensors may have (``bfloat16`` data is held as float32)."""
MAX_RANK = 16
MAX_SIZE = 2**31 - 1
"""Largest size of one dimension (ET-VK sizes are int32)."""
MAX_BINDING = 2**32 - 1
"""``maxStorageBufferRange`` is a 32-bit limit: no Vulkan device binds a larger buffer, so a delegate tensor that
lives in a buffer or is staged through one (inputs, outputs, constants) cannot be larger on any device."""
REFERENCE_BYTES = 8
"""Each element is held once more as a float64 reference."""
SCALAR_KINDS = {"Int": ("int_val", int), "Bool": ("bool_val", bool), "Double": ("double_val", float),
                "String": ("string_val", str), "SymInt": ("value", int)}
"""Scalar value kinds and their payload field (a method's ``value``, a delegate's own field names)."""
METHOD_SCALARS = {"Int": ("value", int), "Bool": ("value", bool), "Double": ("value", float),
                  "String": ("value", str)}
ID_LISTS = ("IntList", "TensorList", "OptionalTensorList")
"""A method's list kinds whose items are value ids (``OptionalTensorList`` uses -1 for None)."""
RAW_LISTS = {"DoubleList": float, "BoolList": bool}
TENSOR_ARGUMENTS = {"Tensor": ("VkTensor",), "Tensor?": ("VkTensor", "Null"), "Tensor[]": ("ValueList",)}
"""Schema types (alias annotations like ``(a!)`` dropped) → the value kinds ET-VK serializes for them."""
VK_RAW_LISTS = {"IntList": int, "DoubleList": float, "BoolList": bool}
"""A delegate's lists of plain items (its ``ValueList`` holds value ids)."""


def check_program(program: Program, *, budget: int | None = None) -> None:
    """Check every method and delegate of ``program``, then its host memory against the budget.

    Raises:
        ProgramFormatError: a field out of range or of the wrong kind (named).
        BudgetError: the program's tensors would take more host memory than the budget.
    """
    total = 0
    for name, method in program.methods.items():
        total += _method(method, f"method {name!r}")
    check_budget(total, "its tensors with their float64 references", budget=budget)


def _fail(where: str, what: str) -> ProgramFormatError:
    """The error naming ``where``; names read from the file may hold line breaks and escapes, so it is made one
    printable line."""
    return ProgramFormatError(one_line(f"{where}: {what}", 400))


def _ids(ids: Sequence[Any], count: int, where: str, *, optional: bool = False) -> None:
    low = -1 if optional else 0
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not low <= int(i) < count:
            raise _fail(where, f"value id {i!r} is not one of the {count} values")


def _sizes(sizes: Any, where: str) -> int:
    """Elements of a tensor with these sizes."""
    if not isinstance(sizes, (list, tuple)) or len(sizes) > MAX_RANK:
        raise _fail(where, f"sizes {str(sizes)[:80]} are not a list of at most {MAX_RANK} sizes")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= int(s) <= MAX_SIZE:
            raise _fail(where, f"size {s!r} of {list(sizes)} is not in 0..{MAX_SIZE}")
    return math.prod(int(s) for s in sizes)


def _itemsize(dtype: Any, where: str) -> int:
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise _fail(where, f"dtype {str(dtype)[:40]!r} is not one vkdiff can judge")
    return np.dtype("float32" if dtype == "bfloat16" else dtype).itemsize


def _method(method: Method, where: str) -> int:
    """Check one execution plan; returns the host bytes its tensors need."""
    count, total = len(method.values), 0
    staged = {vid for ins in method.instructions if ins.kind == "delegate" and 0 <= ins.delegate < len(method.delegates)
              and method.delegates[ins.delegate].graph is not None for vid in ins.args}
    for vid, value in enumerate(method.values):
        total += _method_value(value, count, f"{where} value %{vid}", staged=vid in staged)
    _ids(method.inputs, count, f"{where} inputs")
    _ids(method.outputs, count, f"{where} outputs")
    for vid, array in method.constants.items():
        spec = method.values[vid] if 0 <= vid < count else {}
        if spec.get("kind") != "Tensor" or array.size != math.prod(spec["sizes"]):
            raise _fail(f"{where} constant %{vid}", f"{array.size} elements do not fill its tensor value")
    for index, ins in enumerate(method.instructions):
        _instruction(ins, method, f"{where} instruction {index}")
    for position, entry in enumerate(method.delegates):
        if entry.index != position or not isinstance(entry.backend, str):
            raise _fail(f"{where} delegate {position}", f"index {entry.index} or backend {str(entry.backend)[:40]!r} "
                                                        f"is malformed")
        if (entry.backend == VULKAN_BACKEND) != (entry.graph is not None):
            raise _fail(f"{where} delegate {position}", f"a {str(entry.backend)[:40]} delegate "
                                                        f"{'with' if entry.graph is not None else 'without'} a VkGraph")
        if entry.graph is not None:
            total += _delegate(entry.graph, f"{where} delegate {position}")
    return total


def _method_value(value: dict[str, Any], count: int, where: str, *, staged: bool) -> int:
    """Check one value (``staged``: it crosses into a Vulkan delegate); returns the host bytes it needs."""
    kind = value.get("kind")
    if kind == "Tensor":
        numel = _sizes(value.get("sizes"), where)
        order = value.get("dim_order") or []
        if not isinstance(order, list) or not all(_is(d, int) for d in order) or (
                order and sorted(order) != list(range(len(value["sizes"])))):
            raise _fail(where, f"dim_order {str(order)[:40]} is not a permutation of its {len(value['sizes'])} dims")
        if value.get("dynamism", 0) not in (0, 1, 2) or not isinstance(value.get("dynamism", 0), int):
            raise _fail(where, f"dynamism {str(value.get('dynamism'))[:20]} is not 0, 1 or 2")
        nbytes = numel * _itemsize(value.get("dtype"), where)
        if staged:
            _bindable(nbytes, f"{value.get('dtype')}{list(value['sizes'])}", where)
        return nbytes + numel * REFERENCE_BYTES
    if kind in METHOD_SCALARS:
        _payload(value, *METHOD_SCALARS[kind], where)
    elif kind in ID_LISTS:
        _ids(_items(value, where), count, where, optional=kind == "OptionalTensorList")
    elif kind in RAW_LISTS:
        _raw_items(value, RAW_LISTS[kind], where)
    elif kind != "Null":
        raise _fail(where, f"unknown value kind {str(kind)[:40]!r}")
    return 0


def _is(item: Any, kind: type) -> bool:
    if isinstance(item, (bool, np.bool_)):
        return kind is bool
    if kind is float:
        return isinstance(item, (int, float, np.integer, np.floating))
    return isinstance(item, (int, np.integer)) if kind is int else isinstance(item, kind)


def _payload(value: dict[str, Any], field: str, kind: type, where: str) -> None:
    if not _is(value.get(field), kind):
        raise _fail(where, f"{field} {str(value.get(field))[:40]!r} is not {kind.__name__}")


def _items(value: dict[str, Any], where: str) -> list:
    items = value.get("items")
    if not isinstance(items, list):
        raise _fail(where, f"items {str(items)[:40]!r} are not a list")
    return items


def _raw_items(value: dict[str, Any], kind: type, where: str) -> None:
    bad = [item for item in _items(value, where) if not _is(item, kind)]
    if bad:
        raise _fail(where, f"item {str(bad[0])[:40]!r} is not {kind.__name__}")


def _instruction(ins, method: Method, where: str) -> None:
    count = len(method.values)
    frames_ok = all(_is(frame.get(key, ""), kind) for frame in ins.frames for key, kind in FRAME_FIELDS.items())
    if not isinstance(ins.op, str) or not frames_ok:
        raise _fail(where, "an operator name or stack frame that is not text")
    if ins.kind == "delegate" and not 0 <= ins.delegate < len(method.delegates):
        raise _fail(where, f"delegate {ins.delegate} is not one of the {len(method.delegates)} delegates")
    if ins.kind == "jump_false":
        _ids(ins.args[:1], count, where)
        if len(ins.args) != 2 or not 0 <= ins.args[1] <= len(method.instructions):
            raise _fail(where, f"jump to {ins.args[1:]} is outside the chain")
        return
    if ins.kind in ("move", "free") and len(ins.args) != (2 if ins.kind == "move" else 1):
        raise _fail(where, f"a {ins.kind} with {len(ins.args)} arguments")
    _ids(ins.args, count, where, optional=ins.kind == "kernel")


def _delegate(graph: Delegate, where: str) -> int:
    """Check one Vulkan delegate; returns the host bytes its tensors need."""
    count, total = len(graph.values), 0
    for vid, value in enumerate(graph.values):
        kind = value.get("kind")
        if kind in SCALAR_KINDS:
            _payload(value, *SCALAR_KINDS[kind], f"{where} value %{vid}")
        elif kind == "ValueList":
            _ids(_items(value, f"{where} value %{vid}"), count, f"{where} value %{vid}")
        elif kind in VK_RAW_LISTS:
            _raw_items(value, VK_RAW_LISTS[kind], f"{where} value %{vid}")
        elif kind not in ("VkTensor", "Null"):
            raise _fail(f"{where} value %{vid}", f"unknown value kind {str(kind)[:40]!r}")
    staged = {*graph.input_ids, *graph.output_ids}
    for vid, info in graph.tensors.items():
        total += _tensor(graph, vid, info, f"{where} value %{vid}", staged=vid in staged)
    if len(graph.tensors) != sum(v.get("kind") == "VkTensor" for v in graph.values):
        raise _fail(where, "its tensor table does not match its VkTensor values")
    _ids(graph.input_ids, count, f"{where} inputs")
    _ids(graph.output_ids, count, f"{where} outputs")
    for op in graph.ops:
        if not isinstance(op.name, str) or not op.name or not op.args:
            raise _fail(f"{where} node {op.index}", "an operator call without a name or an output")
        _ids(op.args, count, f"{where} node {op.index} ({op.name[:60]})")
        _call(graph, op, f"{where} node {op.index} ({op.name[:60]})")
    return total


def _call(graph: Delegate, op, where: str) -> None:
    """Arguments a schema types as tensors are tensors, and no call writes a constant."""
    kinds = [graph.values[vid].get("kind") for vid in op.args]
    try:
        schema = schema_of(op.name)
        bound = schema.bind(op.args[:-1])
    except UnknownOpError:
        schema, bound = None, {}
    except SchemaError as exc:
        raise _fail(where, str(exc)) from None
    for arg in schema.arguments if schema else ():
        kind = graph.values[bound[arg.name]].get("kind")
        wanted = TENSOR_ARGUMENTS.get(re.sub(r"\([a-z]!?\)", "", arg.type))
        if wanted and kind not in wanted:
            raise _fail(where, f"argument {arg.name} is value %{bound[arg.name]}, a {kind}; the schema wants "
                               f"{arg.type}")
    out = op.args[-1]
    written = graph.values[out].get("items", []) if kinds[-1] == "ValueList" else [out]
    for vid in written:
        info = graph.tensors.get(vid) if isinstance(vid, int) else None
        if info is not None and info.constant_id >= 0:
            raise _fail(where, f"writes value %{vid}, a constant")


def _bindable(nbytes: int, what: str, where: str) -> None:
    if nbytes > MAX_BINDING:
        raise _fail(where, f"{what} takes {nbytes / 1e9:.1f} GB: no Vulkan device binds a buffer over 4 GiB "
                           f"(maxStorageBufferRange is 32-bit), so no device can run it")


def _tensor(graph: Delegate, vid: int, info, where: str, *, staged: bool) -> int:
    if not 0 <= vid < len(graph.values) or graph.values[vid].get("kind") != "VkTensor":
        raise _fail(where, "a tensor entry for a value that is not a VkTensor")
    numel = _sizes(info.dims, where)
    nbytes = numel * _itemsize(info.dtype, where)
    if staged or info.storage == "BUFFER" or info.constant_id >= 0:
        _bindable(nbytes, f"{info.dtype}{list(info.dims)}", where)
    if info.storage not in STORAGE_TYPES.values() or info.layout not in MEMORY_LAYOUTS.values():
        raise _fail(where, f"storage {info.storage!r} / layout {info.layout!r} unknown")
    for field in ("constant_id", "mem_obj_id"):
        if not isinstance(getattr(info, field), int) or getattr(info, field) < -1:
            raise _fail(where, f"{field} {getattr(info, field)!r} is not an id or -1")
    if info.constant_id >= 0:
        array = graph.constants.get(vid)
        if array is None or array.size != numel:
            held = "no data" if array is None else f"{array.size} elements"
            raise _fail(where, f"constant {info.constant_id} holds {held}, its dims {info.dims} need {numel}")
    return nbytes + numel * REFERENCE_BYTES
