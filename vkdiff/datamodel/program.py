"""An ExecuTorch program as records: methods, their values and instruction chain, every delegate, node sources.

Every subject vkdiff checks (a user's ``.pte``, a user's module, a catalogue case) becomes
one ``Program``; executors and verdicts read nothing else. ``vkdiff.program.pte`` fills
it from a ``.pte`` with executorch's own deserializer. A program travels between machines
as data only: ``to_document`` gives a JSON-able dict plus named numpy arrays (an ``.npz``
without pickles), and ``from_document`` checks every field it reads, so a crafted or
malformed document ends in ``ProgramFormatError`` naming the field.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np

from vkdiff.datamodel.tolerance import Tolerance
from vkdiff.datamodel.vkgraph import Delegate, VkOp, VkTensorInfo

SCALAR_TYPES: dict[int, str] = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
                                7: "float64", 11: "bool", 15: "bfloat16", 27: "uint16", 28: "uint32", 29: "uint64"}
"""ExecuTorch ``ScalarType`` → dtype name (``bfloat16`` data is held as float32 arrays)."""

VULKAN_BACKEND = "VulkanBackend"
"""The backend id of ET-VK delegates (``VulkanBackend`` in a program's delegate table)."""

InstructionKind = Literal["kernel", "delegate", "move", "jump_false", "free"]


class ProgramFormatError(ValueError):
    """A program document (artifact, cache entry) is malformed: the message names the field."""


@dataclasses.dataclass(kw_only=True)
class Source:
    """Where a delegate node comes from in the user's model."""

    module: str = ""
    """Module path (``layers.3.attention.wq``); empty for the top-level module."""
    module_type: str = ""
    """The module's class (``torch.nn.modules.linear.Linear``)."""
    file: str = ""
    """The user's source file of the call (the last frame outside torch, torchao and executorch)."""
    line: int = 0
    code: str = ""
    """That line's code."""
    how: str = ""
    """``lowering`` (recorded while vkdiff lowered it), ``etrecord`` (re-lowered from the ETRecord and verified
    byte for byte), or ``etrecord-unverified`` (through the debug-handle map alone)."""

    def label(self) -> str:
        """``layers.3.attention.wq, model.py:233`` (what a node's line shows)."""
        where = f"{self.file.rsplit('/', 1)[-1]}:{self.line}" if self.file else ""
        return ", ".join(part for part in (self.module or ("<top>" if where else ""), where) if part)


@dataclasses.dataclass(kw_only=True)
class DelegateEntry:
    """One backend delegate of a method."""

    index: int
    """Position in the method's delegate table (``DelegateCall.delegate_index``)."""
    backend: str
    """``VulkanBackend``, ``XnnpackBackend``, ..."""
    compile_specs: dict[str, str] = dataclasses.field(default_factory=dict)
    """Compile specs as the program stores them (values as hex)."""
    graph: Delegate | None = None
    """The decoded ``VkGraph`` (Vulkan delegates only)."""
    blob_size: int = 0
    sha256: str = ""
    """Of the delegate blob (how a re-lowered delegate is matched to this one)."""
    debug_handles: dict[int, list[int]] = dataclasses.field(default_factory=dict)
    """``node_id`` → debug handles, as the delegate's debug-handle map (or the ETRecord) records them."""
    sources: dict[int, Source] = dataclasses.field(default_factory=dict)
    """Op index in the chain → where it comes from."""

    @property
    def vulkan(self) -> bool:
        return self.graph is not None


@dataclasses.dataclass(kw_only=True)
class Instruction:
    """One instruction of a method's chain."""

    kind: InstructionKind
    op: str = ""
    """``aten::cumsum.out`` for a kernel call."""
    delegate: int = -1
    """Delegate index of a delegate call."""
    args: list[int] = dataclasses.field(default_factory=list)
    """Value ids: a kernel's schema arguments then its returns; a delegate's inputs then outputs; ``[from, to]``
    of a move; ``[condition, destination]`` of a conditional jump; ``[value]`` of a free."""
    frames: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The chain's stack trace of the instruction (``filename``, ``lineno``, ``name``, ``context``)."""


@dataclasses.dataclass(kw_only=True)
class Method:
    """One execution plan."""

    name: str
    values: list[dict[str, Any]]
    """Every ``EValue`` as ``{"kind": ...}``: tensors carry ``dtype``, ``sizes``, ``dim_order``, ``dynamism``
    (0 static, 1 bounded, 2 unbounded); ``IntList``/``TensorList``/``OptionalTensorList`` items are value ids."""
    inputs: list[int]
    outputs: list[int]
    instructions: list[Instruction]
    delegates: list[DelegateEntry]
    constants: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    """Constant tensors (weights outside delegates), NCHW-contiguous."""

    def input_specs(self) -> list[dict[str, Any]]:
        """The method's inputs as their values (``kind`` and, for tensors, ``dtype``, ``sizes``, ``dynamism``)."""
        return [self.values[vid] for vid in self.inputs]


@dataclasses.dataclass(kw_only=True)
class Program:
    """A whole ExecuTorch program."""

    name: str
    """File name (``model.pte``) or case id."""
    sha256: str
    """Of the ``.pte`` bytes."""
    methods: dict[str, Method]

    def vulkan_methods(self) -> list[str]:
        return [name for name, m in self.methods.items() if any(d.vulkan for d in m.delegates)]

    def to_document(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """A JSON-able dict and the arrays it names (constants of methods and delegates)."""
        arrays: dict[str, np.ndarray] = {}
        methods = {name: _method_doc(name, method, arrays) for name, method in self.methods.items()}
        return {"name": self.name, "sha256": self.sha256, "methods": methods}, arrays

    @classmethod
    def from_document(cls, doc: Any, arrays: Any) -> "Program":
        """Rebuild from ``to_document``'s output, checking every field.

        Raises:
            ProgramFormatError: a field is missing or has the wrong type (named in the message).
        """
        reader = _Reader(arrays)
        doc = reader.mapping(doc, "program")
        methods = reader.mapping(doc.get("methods"), "methods")
        return cls(name=reader.text(doc.get("name"), "name"), sha256=reader.text(doc.get("sha256"), "sha256"),
                   methods={reader.text(k, "method name"): reader.method(v, f"methods.{k}") for k, v in methods.items()})


def _method_doc(name: str, method: Method, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    for vid, array in method.constants.items():
        arrays[f"{name}/constant/{vid}"] = np.ascontiguousarray(array)
    return {"values": method.values, "inputs": method.inputs, "outputs": method.outputs,
            "instructions": [dataclasses.asdict(i) for i in method.instructions],
            "constants": sorted(method.constants),
            "delegates": [_delegate_doc(name, d, arrays) for d in method.delegates]}


def _delegate_doc(method: str, entry: DelegateEntry, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    doc: dict[str, Any] = {"index": entry.index, "backend": entry.backend, "compile_specs": entry.compile_specs,
                           "blob_size": entry.blob_size, "sha256": entry.sha256,
                           "debug_handles": {str(k): v for k, v in entry.debug_handles.items()},
                           "sources": {str(k): dataclasses.asdict(s) for k, s in entry.sources.items()}}
    graph = entry.graph
    if graph is not None:
        for vid, array in graph.constants.items():
            arrays[f"{method}/delegate/{entry.index}/{vid}"] = np.ascontiguousarray(array)
        doc["graph"] = {"ops": [dataclasses.asdict(op) for op in graph.ops], "values": graph.values,
                        "tensors": [dataclasses.asdict(t) for t in graph.tensors.values()],
                        "constant_keys": {str(k): v for k, v in graph.constant_keys.items()},
                        "input_ids": graph.input_ids, "output_ids": graph.output_ids, "blob_size": graph.blob_size}
    return doc


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_FIELD_TYPES = {"int": _is_int, "str": lambda x: isinstance(x, str), "str | None": lambda x: x is None or
                isinstance(x, str), "list[int]": lambda x: isinstance(x, list) and all(map(_is_int, x))}
"""Annotation → check, for the record fields a document may set."""
FRAME_FIELDS = {"filename": str, "lineno": int, "name": str, "context": str}


class _Reader:
    """Typed reads of a program document; every failure names the field."""

    def __init__(self, arrays: Any):
        self.arrays = arrays

    @staticmethod
    def fail(what: str, expected: str, got: Any) -> ProgramFormatError:
        return ProgramFormatError(f"{what}: expected {expected}, got {type(got).__name__}")

    def mapping(self, value: Any, what: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(what, "an object", value)
        return value

    def items(self, value: Any, what: str) -> list:
        if not isinstance(value, list):
            raise self.fail(what, "a list", value)
        return value

    def text(self, value: Any, what: str) -> str:
        if not isinstance(value, str):
            raise self.fail(what, "a string", value)
        return value

    def integer(self, value: Any, what: str) -> int:
        if not _is_int(value):
            raise self.fail(what, "an integer", value)
        return value

    def frame(self, value: Any, what: str) -> dict[str, Any]:
        """One stack frame of an instruction (``filename``, ``lineno``, ``name``, ``context``)."""
        value = self.mapping(value, what)
        for key, item in value.items():
            kind = FRAME_FIELDS.get(key)
            if kind is None or not (isinstance(item, kind) and not isinstance(item, bool)):
                raise self.fail(f"{what}.{str(key)[:20]}", kind.__name__ if kind else "a known field", item)
        return value

    def ints(self, value: Any, what: str) -> list[int]:
        return [self.integer(v, f"{what}[{i}]") for i, v in enumerate(self.items(value, what))]

    def count(self, value: Any, what: str) -> int:
        """A count of arrays: no more than the archive holds."""
        value = self.integer(value, what)
        if not 0 <= value <= len(self.arrays):
            raise ProgramFormatError(f"{what}: {value} arrays, the archive holds {len(self.arrays)}")
        return value

    def key(self, value: Any, what: str) -> int:
        """A JSON object key that stands for an integer id."""
        if not isinstance(value, str) or not value.lstrip("-").isdigit() or len(value) > 12:
            raise ProgramFormatError(f"{what}: key {str(value)[:20]!r} is not an integer")
        return int(value)

    def record(self, cls: type, value: Any, what: str):
        """A dataclass of plain fields, each checked against its annotation (``int``, ``str``, ``list[int]``...)."""
        value = self.mapping(value, what)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise ProgramFormatError(f"{what}: unknown field {str(unknown[0])[:40]!r}")
        for name, item in value.items():
            kind = str(fields[name].type)
            if kind not in _FIELD_TYPES or not _FIELD_TYPES[kind](item):
                raise self.fail(f"{what}.{name}", kind, item)
        try:
            return cls(**value)
        except TypeError as exc:
            raise ProgramFormatError(f"{what}: {exc}") from None

    def array(self, key: str, what: str) -> np.ndarray:
        try:
            array = self.arrays[key]
        except KeyError:
            raise ProgramFormatError(f"{what}: array {key!r} is missing") from None
        if not isinstance(array, np.ndarray) or array.dtype.hasobject:
            raise ProgramFormatError(f"{what}: array {key!r} is not a plain numeric array")
        return array

    def values(self, value: Any, what: str) -> list[dict[str, Any]]:
        out = [self.mapping(v, f"{what}[{i}]") for i, v in enumerate(self.items(value, what))]
        for i, v in enumerate(out):
            self.text(v.get("kind"), f"{what}[{i}].kind")
        return out

    def method(self, doc: Any, what: str) -> Method:
        doc = self.mapping(doc, what)
        name = what.split(".", 1)[1]
        instructions = []
        for i, ins in enumerate(self.items(doc.get("instructions"), f"{what}.instructions")):
            ins = self.mapping(ins, f"{what}.instructions[{i}]")
            kind = self.text(ins.get("kind"), f"{what}.instructions[{i}].kind")
            if kind not in ("kernel", "delegate", "move", "jump_false", "free"):
                raise ProgramFormatError(f"{what}.instructions[{i}].kind: unknown instruction {kind!r}")
            instructions.append(Instruction(kind=kind, op=self.text(ins.get("op", ""), f"{what}.instructions[{i}].op"),
                                            delegate=self.integer(ins.get("delegate", -1), f"{what}.instructions[{i}]"),
                                            args=self.ints(ins.get("args", []), f"{what}.instructions[{i}].args"),
                                            frames=[self.frame(f, f"{what}.instructions[{i}].frames")
                                                    for f in self.items(ins.get("frames", []), f"{what}.frames")]))
        constants = {vid: self.array(f"{name}/constant/{vid}", f"{what}.constants")
                     for vid in self.ints(doc.get("constants", []), f"{what}.constants")}
        delegates = [self.delegate(d, f"{what}.delegates[{i}]", name)
                     for i, d in enumerate(self.items(doc.get("delegates"), f"{what}.delegates"))]
        return Method(name=name, values=self.values(doc.get("values"), f"{what}.values"),
                      inputs=self.ints(doc.get("inputs"), f"{what}.inputs"),
                      outputs=self.ints(doc.get("outputs"), f"{what}.outputs"), instructions=instructions,
                      delegates=delegates, constants=constants)

    def delegate(self, doc: Any, what: str, method: str) -> DelegateEntry:
        doc = self.mapping(doc, what)
        index = self.integer(doc.get("index"), f"{what}.index")
        sources = {self.key(k, f"{what}.sources"): self.record(Source, v, f"{what}.sources.{k}")
                   for k, v in self.mapping(doc.get("sources", {}), f"{what}.sources").items()}
        handles = {self.key(k, f"{what}.debug_handles"): self.ints(v, f"{what}.debug_handles")
                   for k, v in self.mapping(doc.get("debug_handles", {}), f"{what}.debug_handles").items()}
        graph = self.graph(doc["graph"], f"{what}.graph", f"{method}/delegate/{index}") if doc.get("graph") else None
        specs = {self.text(k, f"{what}.compile_specs"): self.text(v, f"{what}.compile_specs.{k}")
                 for k, v in self.mapping(doc.get("compile_specs", {}), f"{what}.compile_specs").items()}
        return DelegateEntry(index=index, backend=self.text(doc.get("backend"), f"{what}.backend"), compile_specs=specs,
                             graph=graph, blob_size=self.integer(doc.get("blob_size", 0), f"{what}.blob_size"),
                             sha256=self.text(doc.get("sha256", ""), f"{what}.sha256"), debug_handles=handles, sources=sources)

    def graph(self, doc: Any, what: str, prefix: str) -> Delegate:
        doc = self.mapping(doc, what)
        ops = []
        for i, op in enumerate(self.items(doc.get("ops"), f"{what}.ops")):
            op = self.mapping(op, f"{what}.ops[{i}]")
            ops.append(VkOp(index=self.integer(op.get("index"), f"{what}.ops[{i}].index"),
                            name=self.text(op.get("name"), f"{what}.ops[{i}].name"),
                            args=self.ints(op.get("args"), f"{what}.ops[{i}].args"),
                            node_id=self.integer(op.get("node_id", 0), f"{what}.ops[{i}].node_id")))
        tensors = {}
        for i, t in enumerate(self.items(doc.get("tensors"), f"{what}.tensors")):
            info = self.record(VkTensorInfo, t, f"{what}.tensors[{i}]")
            tensors[info.id] = info
        constants = {vid: self.array(f"{prefix}/{vid}", f"{what}.constants")
                     for vid, info in tensors.items() if info.constant_id >= 0}
        keys = {self.key(k, f"{what}.constant_keys"): self.text(v, f"{what}.constant_keys")
                for k, v in self.mapping(doc.get("constant_keys", {}), f"{what}.constant_keys").items()}
        return Delegate(ops=ops, values=self.values(doc.get("values"), f"{what}.values"), tensors=tensors,
                        constants=constants, constant_keys=keys, input_ids=self.ints(doc.get("input_ids"), what),
                        output_ids=self.ints(doc.get("output_ids"), what),
                        blob_size=self.integer(doc.get("blob_size", 0), f"{what}.blob_size"))


@dataclasses.dataclass(kw_only=True)
class PreparedProgram:
    """Everything a device needs to judge one method of a program: no torch, no executorch.

    The calls' inputs are seeded (or the user's); ``expected`` holds eager PyTorch's outputs
    when a module was given (a bare ``.pte`` has none: its output is judged against the
    program evaluated with the references).
    """

    case_id: str
    program: Program
    method: str = "forward"
    steps: list[list[Any]]
    """Each call's inputs in the method's input order: one call, or a prefill then decode steps (or below-bound
    sizes of ``--shapes``)."""
    expected: list[np.ndarray] | None = None
    """Eager PyTorch's outputs of each call, flattened in order (float64); None without a module."""
    tolerance: Tolerance
    """Bound of the method output against eager (or the reference program)."""
    tokens: list[int] = dataclasses.field(default_factory=list)
    """Eager's greedy token of each call (generation cases), fed to the next call."""

    @property
    def generation(self) -> bool:
        return bool(self.tokens)

    @property
    def plan(self) -> Method:
        return self.program.methods[self.method]

    @property
    def delegate(self) -> Delegate:
        """The method's Vulkan delegate when it has exactly one (repro and bisect of single-delegate cases).

        Raises:
            LookupError: the method has no Vulkan delegate, or several.
        """
        graphs = [d.graph for d in self.plan.delegates if d.graph is not None]
        if len(graphs) != 1:
            raise LookupError(f"{self.case_id}: method {self.method!r} has {len(graphs)} Vulkan delegates, not one")
        return graphs[0]

    def to_document(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """A JSON-able dict and its arrays; the tolerance stays out (the reader applies its own policy)."""
        doc, arrays = self.program.to_document()
        for k, inputs in enumerate(self.steps):
            for i, x in enumerate(inputs):
                arrays[f"step/{k}/{i}"] = np.asarray(x)
        for k, out in enumerate(self.expected or []):
            arrays[f"expected/{k}"] = np.asarray(out)
        return {"case": self.case_id, "method": self.method, "program": doc,
                "steps": [len(s) for s in self.steps], "expected": len(self.expected or []) if self.expected is not None
                else None, "tokens": list(self.tokens)}, arrays

    @classmethod
    def from_document(cls, doc: Any, arrays: Any, tolerance: Tolerance) -> "PreparedProgram":
        """Rebuild from ``to_document``'s output, checking every field (``ProgramFormatError`` names a bad one);
        ``tolerance`` is the reader's: a document never sets its own bound."""
        reader = _Reader(arrays)
        doc = reader.mapping(doc, "prepared")
        program = Program.from_document(doc.get("program"), arrays)
        method = reader.text(doc.get("method"), "method")
        if method not in program.methods:
            raise ProgramFormatError(f"method: {method!r} is not a method of the program")
        steps = [[reader.array(f"step/{k}/{i}", "steps") for i in range(reader.count(n, f"steps[{k}]"))]
                 for k, n in enumerate(reader.items(doc.get("steps"), "steps"))]
        count = doc.get("expected")
        expected = None if count is None else [reader.array(f"expected/{k}", "expected")
                                               for k in range(reader.count(count, "expected"))]
        return cls(case_id=reader.text(doc.get("case"), "case"), program=program, method=method, steps=steps,
                   expected=expected, tolerance=tolerance, tokens=reader.ints(doc.get("tokens", []), "tokens"))
