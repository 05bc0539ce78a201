"""ExecuTorch's own reading of a ``.pte`` (``deserialize_pte_binary``), as the oracle of vkdiff's reader.

vkdiff reads programs with its own flatbuffer reader so that judging needs no executorch;
this module builds the same ``Program`` record from executorch's generated classes, and
``differences`` names every field where the two readings disagree.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from vkdiff.datamodel.program import SCALAR_TYPES, VULKAN_BACKEND, DelegateEntry, Instruction, Method, Program
from vkdiff.program.delegate import decode, named_buffers


def executorch_program(data: bytes, name: str) -> Program:
    from executorch.exir._serialize._program import deserialize_pte_binary

    pte = deserialize_pte_binary(bytes(data))
    named = dict(named_buffers(pte.named_data)) if pte.named_data is not None else {}
    methods = {str(plan.name): _method(plan, pte.program, named) for plan in pte.program.execution_plan}
    return Program(name=name, sha256=hashlib.sha256(data).hexdigest(), methods=methods)


def differences(ours: Program, theirs: Program) -> list[str]:
    """Every field where the two readings differ (documents compared whole, arrays bitwise)."""
    doc_a, arrays_a = ours.to_document()
    doc_b, arrays_b = theirs.to_document()
    out = [f"document differs: {_first_difference(doc_a, doc_b)}"] if doc_a != doc_b else []
    if set(arrays_a) != set(arrays_b):
        out.append(f"array names differ: {sorted(set(arrays_a) ^ set(arrays_b))[:5]}")
    for key in sorted(set(arrays_a) & set(arrays_b)):
        a, b = np.asarray(arrays_a[key]), np.asarray(arrays_b[key])
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            out.append(f"array {key}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
    return out


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {a!r:.200} vs {b!r:.200}"


def _method(plan: Any, program: Any, named: dict[str, bytes]) -> Method:
    operators = [f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators]
    values = [_value(v.val) for v in plan.values]
    constants = {vid: _constant(v.val, program, named) for vid, v in enumerate(plan.values)
                 if type(v.val).__name__ == "Tensor" and _is_constant(v.val)}
    chain = plan.chains[0] if plan.chains else None
    instructions = []
    for index, ins in enumerate(chain.instructions if chain else []):
        frames = []
        if chain.stacktrace and index < len(chain.stacktrace) and chain.stacktrace[index] is not None:
            frames = [{"filename": f.filename or "", "lineno": f.lineno or 0, "name": f.name or "",
                       "context": f.context or ""} for f in chain.stacktrace[index].items or []]
        instructions.append(_instruction(ins.instr_args, operators, frames))
    delegates = [_delegate(i, d, program, named) for i, d in enumerate(plan.delegates)]
    return Method(name=plan.name, values=values, inputs=list(plan.inputs), outputs=list(plan.outputs),
                  instructions=instructions, delegates=delegates, constants=constants)


def _instruction(args: Any, operators: list[str], frames: list[dict[str, Any]]) -> Instruction:
    kind = type(args).__name__
    if kind == "KernelCall":
        return Instruction(kind="kernel", op=operators[args.op_index], args=list(args.args), frames=frames)
    if kind == "DelegateCall":
        return Instruction(kind="delegate", delegate=args.delegate_index, args=list(args.args), frames=frames)
    if kind == "MoveCall":
        return Instruction(kind="move", args=[args.move_from, args.move_to])
    if kind == "JumpFalseCall":
        return Instruction(kind="jump_false", args=[args.cond_value_index, args.destination_instruction])
    return Instruction(kind="free", args=[args.value_index])


def _value(val: Any) -> dict[str, Any]:
    kind = type(val).__name__
    if kind == "Tensor":
        return {"kind": "Tensor", "dtype": SCALAR_TYPES.get(int(val.scalar_type), f"scalar_type_{int(val.scalar_type)}"),
                "sizes": list(val.sizes), "dim_order": list(val.dim_order), "dynamism": int(val.shape_dynamism),
                "constant": _is_constant(val), "mutable": val.allocation_info is not None and val.data_buffer_idx > 0}
    if kind in ("Int", "Bool", "String"):
        return {"kind": kind, "value": getattr(val, f"{kind.lower()}_val")}
    if kind == "Double":
        return {"kind": kind, "value": float(val.double_val)}
    if kind in ("IntList", "DoubleList", "BoolList", "TensorList", "OptionalTensorList"):
        return {"kind": kind, "items": list(val.items)}
    return {"kind": "Null"}


def _is_constant(tensor: Any) -> bool:
    external = tensor.extra_tensor_info is not None and int(tensor.extra_tensor_info.location) == 1
    return tensor.allocation_info is None and (tensor.data_buffer_idx > 0 or external)


def _constant(tensor: Any, program: Any, named: dict[str, bytes]) -> np.ndarray:
    dtype_name = SCALAR_TYPES[int(tensor.scalar_type)]
    info = tensor.extra_tensor_info
    if info is not None and int(info.location) == 1:
        raw = named[info.fully_qualified_name]
    else:
        raw = program.constant_buffer[tensor.data_buffer_idx].storage
    stored = [tensor.sizes[d] for d in tensor.dim_order] if tensor.dim_order else list(tensor.sizes)
    count = int(np.prod(stored)) if stored else 1
    if dtype_name == "bfloat16":
        array = (np.frombuffer(raw, np.uint16, count=count).astype(np.uint32) << 16).view(np.float32)
    else:
        array = np.frombuffer(raw, np.dtype(dtype_name), count=count)
    array = array.reshape(stored)
    if tensor.dim_order and list(tensor.dim_order) != sorted(tensor.dim_order):
        array = np.transpose(array, np.argsort(tensor.dim_order))
    return np.ascontiguousarray(array)


def _delegate(index: int, delegate: Any, program: Any, named: dict[str, bytes]) -> DelegateEntry:
    blob = bytes(program.backend_delegate_data[delegate.processed.index].data)
    specs = {spec.key: bytes(spec.value).hex() for spec in delegate.compile_specs}
    graph = decode(blob, named) if delegate.id == VULKAN_BACKEND else None
    return DelegateEntry(index=index, backend=delegate.id, compile_specs=specs, graph=graph, blob_size=len(blob),
                         sha256=hashlib.sha256(blob).hexdigest())
