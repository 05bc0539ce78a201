"""Static check: buffer and image accesses whose index is not bounds-checked against tensor metadata (no device).

ET-VK sizes a dispatch to cover the tensor, rounded up to whole workgroups, and each shader is meant to return (or
skip) for invocations past the tensor's limits, read from its metadata: a uniform buffer (``limits``, ``sizes``,
``numel``, ``BufferMetadata``) or a push constant. An access no such check guards reads or writes past the tensor for
the invocations of the last workgroups: on a phone without robust buffer access, past the allocation.

The check works on the module as glslc built it (after ``-O``):

- *metadata values* start at loads through a uniform buffer or push constant and flow through every instruction
  that uses them, through function variables they are stored in, and into the parameters of calls;
- an access (``OpLoad``/``OpStore`` through a storage buffer, ``OpImageRead``/``OpImageWrite``/``OpImageFetch``,
  sampling with integer coordinates) is *checked* when it is control dependent (post-dominance frontier), directly
  or through other branches, on a branch whose condition is a metadata value; or when its index passes through a
  ``min``/``clamp`` with a metadata operand; or when every call of its function is so checked.

What it cannot tell: whether the check compares the index against the *accessed* tensor's own metadata (it accepts
any tensor's), and whether the comparison is right (``<`` against ``<=``, a tile's tail rows): those need the
device (canaries, ``--validate gpu``).
"""

from __future__ import annotations

import dataclasses

from vkdiff.device.shaders.spirv_cfg import (Inst, ancestors, control_dependences, disassemble, functions, names_of,
                                      successors)

METADATA_CLASSES = {"Uniform", "PushConstant"}
"""Storage classes of tensor metadata (a ``Uniform`` variable decorated ``BufferBlock`` is a storage buffer)."""
IMAGE_ACCESSES = {"OpImageRead": "read", "OpImageWrite": "write", "OpImageFetch": "read"}
CLAMPS = {"UMin", "SMin", "FMin", "NMin", "UClamp", "SClamp", "FClamp", "NClamp"}
"""GLSL.std.450 instructions that bound an index by one of their operands."""


@dataclasses.dataclass(frozen=True)
class UncheckedAccess:
    """One access to a tensor binding that no metadata bounds check guards."""

    binding: int
    """The descriptor binding accessed."""
    access: str
    """``read`` or ``write``."""
    kind: str
    """``buffer`` or ``image``."""
    function: str
    """The function holding it."""
    text: str
    """The instruction, as disassembled."""

    def describe(self, names: dict[int, str] | None = None) -> str:
        name = (names or {}).get(self.binding)
        return (f"{self.kind} {self.access} of binding {self.binding}" + (f" ({name})" if name else "")
                + f" in {self.function}: no bounds check against tensor metadata guards it")


class _Bounds:
    """Metadata values, then the accesses no check on them guards."""

    def __init__(self, insts: list[Inst]):
        self.names = names_of(insts)
        decorated: dict[str, set[str]] = {}
        self.bindings: dict[str, int] = {}
        for i in insts:
            if i.op == "OpDecorate" and i.literals:
                decorated.setdefault(i.ids[0], set()).add(i.literals[0])
                if i.literals[0] == "Binding":
                    self.bindings[i.ids[0]] = int(i.literals[1])
        pointee = {i.result: i.ids[-1] for i in insts if i.op == "OpTypePointer"}
        self.tensors: dict[str, str] = {}
        """Variable → ``buffer`` or ``image`` for each tensor binding."""
        self.meta: set[str] = set()
        for i in insts:
            if i.op != "OpVariable":
                continue
            storage = i.literals[0] if i.literals else ""
            block = decorated.get(pointee.get(i.ids[0], ""), set())
            if storage == "StorageBuffer" or (storage == "Uniform" and "BufferBlock" in block):
                self.tensors[i.result] = "buffer"
            elif storage == "UniformConstant" and i.result in self.bindings:
                self.tensors[i.result] = "image"
            elif storage in METADATA_CLASSES:
                self.meta.add(i.result)
        self.functions = functions(insts, self.names)
        self.by_name = {fn.name: fn for fn in self.functions}
        self.base: dict[str, str] = {}
        """Pointer (or image value) → what it was derived from, back to a variable."""
        self.indices: dict[str, list[str]] = {}
        """Access chain → its index operands."""
        self.clamped: set[str] = set()
        self.derived = set(self.meta)
        self._propagate()

    def _root(self, pointer: str) -> str:
        while pointer in self.base:
            pointer = self.base[pointer]
        return pointer

    def _propagate(self) -> None:
        changed = True
        while changed:
            changed = False
            for fn in self.functions:
                for body in fn.blocks.values():
                    for inst in body:
                        changed |= self._instruction(inst)

    def _add(self, into: set[str], target: str | None) -> bool:
        if target is None or target in into:
            return False
        into.add(target)
        return True

    def _instruction(self, inst: Inst) -> bool:
        ids = inst.ids
        if inst.op in ("OpAccessChain", "OpInBoundsAccessChain", "OpPtrAccessChain", "OpCopyObject", "OpImage",
                       "OpSampledImage") and len(ids) > 1:
            self.base.setdefault(inst.result, ids[1])
            self.indices.setdefault(inst.result, ids[2:] if "AccessChain" in inst.op else [])
        if inst.op == "OpStore":
            changed = False
            if ids[1] in self.derived:
                changed |= self._add(self.derived, self._root(ids[0]))
            if ids[1] in self.clamped:
                changed |= self._add(self.clamped, self._root(ids[0]))
            return changed
        if inst.op == "OpFunctionCall":
            callee = self.by_name.get(self.names.get(ids[1], ids[1]))
            changed = False
            for param, arg in zip(callee.params if callee else [], ids[2:]):
                if arg in self.derived:
                    changed |= self._add(self.derived, param)
                if arg in self.clamped:
                    changed |= self._add(self.clamped, param)
            return changed | (self._add(self.derived, inst.result) if any(a in self.derived for a in ids[2:])
                              else False)
        if inst.result is None or inst.op == "OpVariable":
            return False
        operands = ids[1:]
        roots = [self._root(i) for i in operands]
        changed = False
        if any(i in self.derived for i in operands) or any(r in self.derived for r in roots):
            changed |= self._add(self.derived, inst.result)
        if any(i in self.clamped for i in operands) or (inst.op == "OpLoad" and roots[0] in self.clamped):
            changed |= self._add(self.clamped, inst.result)
        if inst.op == "OpExtInst" and any(lit in CLAMPS for lit in inst.literals) \
                and any(i in self.derived for i in operands[2:]):
            changed |= self._add(self.clamped, inst.result)
        return changed

    def _checked_blocks(self, fn) -> set[str]:
        succ = successors(fn)
        deps = control_dependences(fn, succ)
        guards = {label for label, body in fn.blocks.items()
                  if body[-1].op in ("OpBranchConditional", "OpSwitch") and body[-1].ids
                  and body[-1].ids[0] in self.derived}
        return {label for label in fn.order if ancestors(label, deps) & guards}

    def _checked_calls(self) -> set[str]:
        """Functions every call of which is checked (or within such a function)."""
        checked_in = {fn.name: self._checked_blocks(fn) for fn in self.functions}
        calls: dict[str, list[tuple[str, str]]] = {}
        for fn in self.functions:
            for label, body in fn.blocks.items():
                for inst in body:
                    if inst.op == "OpFunctionCall":
                        calls.setdefault(self.names.get(inst.ids[1], inst.ids[1]), []).append((fn.name, label))
        checked: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, sites in calls.items():
                if name not in checked and all(label in checked_in[caller] or caller in checked
                                               for caller, label in sites):
                    checked.add(name)
                    changed = True
        return checked

    def _access(self, inst: Inst) -> tuple[str, str, str | None] | None:
        """(variable, read/write, index id) of a tensor access, else None."""
        if inst.op in ("OpLoad", "OpStore"):
            pointer = inst.ids[1] if inst.op == "OpLoad" else inst.ids[0]
            root = self._root(pointer)
            if self.tensors.get(root) == "buffer":
                return root, "read" if inst.op == "OpLoad" else "write", pointer
            return None
        if inst.op in IMAGE_ACCESSES:
            image = inst.ids[1] if inst.op != "OpImageWrite" else inst.ids[0]
            root = self._root(self.base.get(image, image))
            coordinate = inst.ids[2] if inst.op != "OpImageWrite" else inst.ids[1]
            return root, IMAGE_ACCESSES[inst.op], coordinate
        return None

    def unchecked(self) -> list[UncheckedAccess]:
        loads = {}
        for fn in self.functions:
            for body in fn.blocks.values():
                for inst in body:
                    if inst.op == "OpLoad" and inst.result:
                        loads[inst.result] = inst.ids[1]
        for image, pointer in loads.items():  # an image value is a load of its variable (or of a sampled image)
            self.base.setdefault(image, pointer)
        checked_fns = self._checked_calls()
        found = []
        for fn in self.functions:
            checked = self._checked_blocks(fn)
            for label in fn.order:
                for inst in fn.blocks[label]:
                    access = self._access(inst)
                    if access is None or access[0] not in self.tensors:
                        continue
                    root, how, index = access
                    if label in checked or fn.name in checked_fns or self._index_clamped(index):
                        continue
                    found.append(UncheckedAccess(self.bindings.get(root, -1), how, self.tensors[root], fn.name,
                                                 inst.text))
        return found

    def _index_clamped(self, index: str | None) -> bool:
        """The index (or, for a pointer, any index of its access chains) passes through a metadata clamp."""
        seen = set()
        while index is not None and index not in seen:
            seen.add(index)
            if index in self.clamped or any(i in self.clamped for i in self.indices.get(index, ())):
                return True
            index = self.base.get(index)
        return False


def unchecked_accesses(spv: bytes) -> list[UncheckedAccess]:
    """Every buffer or image access of the module that no bounds check against tensor metadata guards."""
    return _Bounds(disassemble(spv)).unchecked()
