"""A ``.pte`` file as a ``Program``: executorch's own deserializer, every method, every Vulkan delegate decoded.

``deserialize_pte_binary`` gives the ``Program`` flatbuffer with its segments restored
(delegate blobs inline, constants in ``constant_buffer``, named data beside it). Each
execution plan becomes a ``Method``: its values, its chain's instructions (kernel
calls with their operator name, delegate calls, moves, jumps, frees) with the chain's
stack traces, its constant tensors, and its delegates; Vulkan delegates are decoded
into ``VkGraph`` records with the constants of the program's named data store.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import numpy as np

from vkdiff.datamodel.budget import BudgetError
from vkdiff.datamodel.text import one_line
from vkdiff.datamodel.program import (SCALAR_TYPES, VULKAN_BACKEND, DelegateEntry, Instruction, Method, Program,
                                      ProgramFormatError)
from vkdiff.datamodel.wellformed import check_program
from vkdiff.program.delegate import DelegateDecodeError, decode, named_buffers

MALFORMED = (AttributeError, IndexError, KeyError, TypeError, ValueError, OverflowError, struct.error,
             UnicodeDecodeError)
"""What walking the generated flatbuffer classes over crafted bytes raises (a table that is None, an offset or
index past the end, a field of the wrong type): all mean the program is malformed."""


class ProgramLoadError(ValueError):
    """The bytes are not a loadable ExecuTorch program (one line naming the file and the problem)."""


def load_pte(data: bytes, name: str = "program.pte") -> Program:
    """Decode a serialized program and check every field the executors index by (``check_program``).

    Raises:
        ProgramLoadError: not an ExecuTorch program, truncated, a Vulkan delegate that cannot be read, a field out
            of range, or tensors over the host memory budget.
    """
    from executorch.exir._serialize._program import deserialize_pte_binary

    if len(data) < 8 or data[4:6] != b"ET":
        raise ProgramLoadError(f"{name}: not an ExecuTorch program (no ET file identifier in its first 8 bytes)")
    try:
        pte = deserialize_pte_binary(bytes(data))
    except Exception as exc:  # executorch raises whatever its flatbuffer reader hits on bad bytes
        raise ProgramLoadError(f"{name}: not a readable ExecuTorch program ({type(exc).__name__}: "
                               f"{one_line(exc)}); is it truncated?") from None
    methods = {}
    try:
        named = dict(named_buffers(pte.named_data)) if pte.named_data is not None else {}
        for index, plan in enumerate(pte.program.execution_plan):
            where = f"method {one_line(repr(plan.name), 60)}" if isinstance(plan.name, str) else \
                f"execution plan {index}"
            try:
                methods[str(plan.name)] = _method(plan, pte.program, named)
            except DelegateDecodeError as exc:
                raise ProgramLoadError(f"{name}: {where}: {exc}") from None
            except MALFORMED as exc:
                raise ProgramLoadError(f"{name}: {where}: malformed ({type(exc).__name__}: "
                                       f"{one_line(exc, 120)})") from None
    except MALFORMED as exc:
        raise ProgramLoadError(f"{name}: malformed program ({type(exc).__name__}: {one_line(exc, 120)})") from None
    program = Program(name=name, sha256=hashlib.sha256(data).hexdigest(), methods=methods)
    try:
        check_program(program)
    except (ProgramFormatError, BudgetError) as exc:
        raise ProgramLoadError(f"{name}: {exc}") from None
    return program


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
        raw = val.double_val
        return {"kind": kind, "value": float(raw)}
    if kind in ("IntList", "DoubleList", "BoolList", "TensorList", "OptionalTensorList"):
        return {"kind": kind, "items": list(val.items)}
    return {"kind": "Null"}


def _is_constant(tensor: Any) -> bool:
    external = tensor.extra_tensor_info is not None and int(tensor.extra_tensor_info.location) == 1
    return tensor.allocation_info is None and (tensor.data_buffer_idx > 0 or external)


def _constant(tensor: Any, program: Any, named: dict[str, bytes]) -> np.ndarray:
    """A constant's bytes as an NCHW-contiguous array (stored in its dim order)."""
    dtype_name = SCALAR_TYPES.get(int(tensor.scalar_type))
    if dtype_name is None:
        raise ProgramLoadError(f"constant of ScalarType {int(tensor.scalar_type)} is not supported")
    info = tensor.extra_tensor_info
    if info is not None and int(info.location) == 1:
        if info.fully_qualified_name not in named:
            raise ProgramLoadError(f"constant {info.fully_qualified_name!r} lives in an external .ptd file, which "
                                   f"vkdiff does not read")
        raw = named[info.fully_qualified_name]
    else:
        raw = program.constant_buffer[tensor.data_buffer_idx].storage
    stored = [tensor.sizes[d] for d in tensor.dim_order] if tensor.dim_order else list(tensor.sizes)
    count = int(np.prod(stored)) if stored else 1
    if dtype_name == "bfloat16":
        bits = np.frombuffer(raw, np.uint16, count=count).astype(np.uint32) << 16
        array = bits.view(np.float32)
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

