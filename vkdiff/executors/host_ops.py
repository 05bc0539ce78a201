"""The non-delegated instructions of a program, run on the host: the numpy references first, torch's ATen ops after.

A ``KernelCall`` names its operator (``aten::cumsum.out``) and passes every schema
argument, then the returns, as value ids; an out variant's returns are its out
arguments again. The functional reference of the op (``aten.cumsum.default``, found by
name and argument count in the declared schemas) computes it in float64 and the result
is rounded to the out tensor's dtype: a runner without torch runs host ops, and every
runner computes them alike. An op without a reference goes to ATen (where torch is
installed): each argument is converted by the type the schema declares (``ScalarType``
ints to torch dtypes, ``IntList`` items through their ``Int`` values, ``Tensor?[]``
lists with ``None``), out tensors start empty and ATen sizes them. ExecuTorch's own
primitive ops (``executorch_prim::*``, ``aten::sym_size.int``) are evaluated here directly.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from vkdiff.capture import quiet_libraries
from vkdiff.datamodel import SCALAR_TYPES, OpSchema
from vkdiff.datamodel.schemas import OP_SCHEMAS
from vkdiff.reference import ops as reference

TORCH_DTYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
                11: "bool", 15: "bfloat16"}
"""c10 ``ScalarType`` (as a program stores a dtype argument) → torch dtype name."""
MEMORY_FORMATS = {0: "contiguous_format", 1: "preserve_format", 2: "channels_last", 3: "channels_last_3d"}

PRIM_SCALAR: dict[str, Callable[..., Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "floordiv": operator.floordiv,
    "truediv": operator.truediv, "mod": operator.mod, "eq": operator.eq, "gt": operator.gt, "lt": operator.lt,
    "ge": operator.ge, "le": operator.le, "neg": operator.neg, "sym_float": float, "ceil": math.ceil,
    "round": round, "trunc": math.trunc, "sym_max": max, "sym_min": min,
}
"""``executorch_prim::<name>.Scalar`` (and ``.int``) evaluated in Python."""


class HostOpError(RuntimeError):
    """A host instruction cannot run here (unknown operator, or ATen refused its arguments)."""


def _torch():
    try:
        import torch
    except ImportError:
        raise HostOpError("torch is not installed here and vkdiff has no numpy reference for this op") from None
    return torch


@functools.lru_cache(maxsize=None)
def _register_executorch_ops() -> None:
    """Operators that exist only once executorch, torchao or the LLM custom ops are imported (quietly)."""
    import importlib

    with quiet_libraries():
        for module in ("executorch.exir.passes.dim_order_ops_registry",
                       "executorch.exir.passes.executorch_prim_ops_registry", "executorch.backends.vulkan.custom_ops_lib",
                       "torchao", "executorch.extension.llm.custom_ops.custom_ops",
                       "executorch.kernels.quantized", "torch.ao.quantization.fx._decomposed"):
            try:
                importlib.import_module(module)
            except Exception:  # an optional registration; the op itself then reports it is missing
                pass


def resolve(op: str) -> Any:
    """``torch.ops`` overload for ``ns::name.overload`` (a program's spelling) or ``ns.name.overload`` (a VkGraph's).

    Raises:
        HostOpError: torch knows no such operator.
    """
    torch = _torch()
    if "::" in op:
        ns, _, rest = op.partition("::")
        name, _, overload = rest.partition(".")
    else:
        ns, name, overload = (op.split(".") + ["default"])[:3]
    _register_executorch_ops()
    try:
        packet = getattr(getattr(torch.ops, ns), name)
        return getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        raise HostOpError(f"host operator {op} is not registered with torch here") from None


@functools.lru_cache(maxsize=None)
def declared_types(op: str) -> list[str]:
    """Each argument's type as the schema text declares it (``ScalarType?``, ``Tensor?[]``, ``SymInt[]``)."""
    return [a.type for a in OpSchema.parse(str(resolve(op)._schema)).arguments]


@functools.lru_cache(maxsize=None)
def _out_flags(op: str) -> tuple[bool, ...]:
    return tuple(bool(a.is_out) for a in resolve(op)._schema.arguments)


def call(op: str, values: Sequence[Any], *, out_dtypes: dict[int, str] | None = None,
         where: str = "") -> tuple[tuple[Any, ...], dict[int, Any]]:
    """Call ``op`` with one value per schema argument (converted by its declared type; an out argument starts as an
    empty tensor of ``out_dtypes[i]``, which ATen sizes). Returns its results and, by argument position, every
    argument it writes in place (``Tensor(a!)``), as torch tensors.

    Raises:
        HostOpError: the operator is unknown or ATen rejected the call (the message names the op).
    """
    overload = resolve(op)
    positional, keywords, written = [], {}, {}
    for index, (argument, declared, value) in enumerate(zip(overload._schema.arguments, declared_types(op), values)):
        if argument.is_out:
            converted = _torch().empty(0, dtype=_torch_dtype((out_dtypes or {}).get(index, "float32")))
        else:
            converted = HostOps.convert(declared, value)
        if argument.alias_info is not None and argument.alias_info.is_write:
            written[index] = converted
        if argument.kwarg_only:
            keywords[argument.name] = converted
        else:
            positional.append(converted)
    try:
        produced = overload(*positional, **keywords)
    except Exception as exc:
        raise HostOpError(f"{op}{where}: {type(exc).__name__}: {str(exc).strip()[:300]}") from None
    return (tuple(produced) if isinstance(produced, (tuple, list)) else (produced,)), written


class HostOps:
    """Runs a method's kernel calls on its value table (``env`` holds numpy arrays and Python scalars)."""

    def __init__(self, values: Sequence[dict[str, Any]], constants: dict[int, np.ndarray]):
        self.values, self.constants = values, constants

    def value(self, vid: int, env: dict[int, Any]) -> Any:
        """A value as the program holds it: computed, constant, or the literal the value table stores."""
        if vid in env:
            return env[vid]
        if vid in self.constants:
            return self.constants[vid]
        spec = self.values[vid]
        kind = spec["kind"]
        if kind in ("Int", "Double", "Bool", "String"):
            return spec["value"]
        if kind in ("IntList", "TensorList"):
            return [self.value(i, env) for i in spec["items"]]
        if kind == "OptionalTensorList":
            return [None if i < 0 else self.value(i, env) for i in spec["items"]]
        if kind in ("DoubleList", "BoolList"):
            return list(spec["items"])
        if kind == "Tensor":
            raise HostOpError(f"value %{vid} is read before any instruction writes it")
        return None

    def run(self, op: str, args: Sequence[int], env: dict[int, Any]) -> None:
        """Execute one kernel call, writing its returns into ``env``.

        Raises:
            HostOpError: the operator is unknown or ATen rejected the call (the message names the op).
        """
        ns, _, rest = op.partition("::")
        if ns == "executorch_prim" or op in ("aten::sym_size.int", "aten::sym_numel"):
            self._prim(op, rest, args, env)
            return
        if self._reference(op, args, env):
            return
        count = len(declared_types(op))
        if len(args) < count:
            raise HostOpError(f"{op}: the call passes {len(args)} values for {count} arguments")
        values = [None if is_out else self.value(vid, env) for vid, is_out in zip(args, _out_flags(op))]
        outs = {i: self.values[vid].get("dtype", "float32") for i, vid in enumerate(args[:count]) if _out_flags(op)[i]}
        results, _ = call(op, values, out_dtypes=outs)
        for vid, result in zip(args[count:], results):
            env[vid] = to_numpy(result)

    def _reference(self, op: str, args: Sequence[int], env: dict[int, Any]) -> bool:
        """Run ``op`` through its functional numpy reference; False when it has none."""
        outs = _out_count(args)
        found = functional_reference(op, len(args) - 2 * outs)
        if found is None:
            return False
        schema = OP_SCHEMAS[found]
        given = {a.name: _numpy_argument(a.type, self.value(vid, env)) for a, vid in zip(schema.arguments, args)}
        try:
            produced = reference.evaluate(found, given)
        except Exception as exc:  # a reference refusing its arguments is the op's error, named
            raise HostOpError(f"{op} (numpy reference {found}): {type(exc).__name__}: {str(exc)[:300]}") from None
        results = produced if isinstance(produced, (tuple, list)) else (produced,)
        for vid, result in zip(args[len(args) - outs:], results):
            dtype = self.values[vid].get("dtype", "float32")
            env[vid] = np.asarray(result).astype("float32" if dtype == "bfloat16" else dtype)
        return True

    @staticmethod
    def convert(declared: str, value: Any) -> Any:
        """A value as an ATen argument of the declared type (dtypes, memory formats, tensors, lists)."""
        torch = _torch()
        base = declared.rstrip("?")
        if value is None:
            return None
        if base.startswith("ScalarType"):
            return getattr(torch, TORCH_DTYPES[int(value)])
        if base.startswith("MemoryFormat"):
            return getattr(torch, MEMORY_FORMATS[int(value)])
        if base.startswith("Layout"):
            return torch.strided
        if base.startswith("Device"):
            return torch.device("cpu")
        if base.startswith("Tensor"):
            if isinstance(value, list):
                return [None if v is None else _to_torch(v) for v in value]
            return _to_torch(value)
        if base.endswith("[]"):
            return [int(v) if "int" in base.lower() else v for v in value]
        return value

    def _prim(self, op: str, rest: str, args: Sequence[int], env: dict[int, Any]) -> None:
        name = rest.split(".")[0]
        inputs = [self.value(vid, env) for vid in args[:-1]]
        if op in ("aten::sym_size.int",):
            result = int(np.shape(inputs[0])[int(inputs[1])])
        elif op == "aten::sym_numel":
            result = int(np.size(inputs[0]))
        elif name == "et_view":
            result = np.reshape(inputs[0], [int(s) for s in inputs[1]])
        elif name == "et_copy_index":
            copy_to, copy_from, index = inputs
            result = np.array(copy_to)
            result[int(index)] = copy_from
        elif name in PRIM_SCALAR:
            result = PRIM_SCALAR[name](*[v.item() if isinstance(v, np.ndarray) else v for v in inputs])
        else:
            raise HostOpError(f"host operator {op} is not one vkdiff evaluates")
        env[args[-1]] = result


def _out_count(args: Sequence[int]) -> int:
    """How many out arguments an out-variant call has: its returns repeat them as its last value ids."""
    for count in range(len(args) // 2, 0, -1):
        if list(args[-count:]) == list(args[-2 * count:-count]):
            return count
    return 0


@functools.lru_cache(maxsize=None)
def functional_reference(op: str, count: int) -> str | None:
    """The reference op (``aten.cumsum.default``) of a program's out-variant call (``aten::cumsum.out``) with
    ``count`` functional arguments: the same name, a declared schema of that many arguments, a registered
    reference."""
    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    if overload != "out" and not overload.endswith("_out"):
        return None
    candidates = [full for full in OP_SCHEMAS if full.startswith(f"{ns}.{name}.") and full in reference.OPS
                  and len(OP_SCHEMAS[full].arguments) == count]
    return sorted(candidates, key=lambda full: not full.endswith(".default"))[0] if candidates else None


def _numpy_argument(declared: str, value: Any) -> Any:
    """A program value as a reference takes it: ScalarType ints as numpy dtype names, tensors as arrays."""
    if value is None:
        return None
    if declared.rstrip("?").startswith("ScalarType"):
        return SCALAR_TYPES[int(value)]
    return value


def _torch_dtype(name: str) -> Any:
    return getattr(_torch(), name)


def _to_torch(value: Any) -> Any:
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))
    return value


def to_numpy(value: Any) -> Any:
    if not type(value).__module__.startswith("torch"):
        return value
    torch = _torch()
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bfloat16:
            value = value.float()
        return value.detach().cpu().numpy()
    return value

