"""Static check: workgroup barriers an invocation can skip, found in the SPIR-V of every variant (no device).

A ``barrier()`` that some invocations of a workgroup skip is undefined behaviour: Mali loses the device, other GPUs
hang or read stale shared memory. The class is an early ``return`` of out-of-range invocations before a barrier
(``reduce``, ExecuTorch #22325), or a barrier under an ``if`` or loop whose condition differs between invocations.

The check works on the module as glslc built it (``-O`` turns an early return into a branch to the function's end,
so the control-flow graph is what matters, not ``OpReturn``):

- *non-uniform values* start at the invocation-id builtins and flow through every instruction that uses them, through
  memory (a function or shared variable stored with a non-uniform value, or stored under non-uniform control), loads
  through non-uniform pointers, phis merging divergent paths, and call arguments into parameters;
- a branch (``OpBranchConditional``, ``OpSwitch``) on a non-uniform value is *divergent*;
- a barrier is *skippable* when it is control dependent (post-dominance frontier), directly or through other
  branches, on a divergent branch. A call to a function holding a barrier counts as a barrier at the call.
"""

from __future__ import annotations

import dataclasses

from vkdiff.device.shaders.spirv_cfg import (Function, Inst, ancestors, control_dependences, disassemble, functions,
                                      names_of, successors)

INVOCATION_BUILTINS = {"LocalInvocationId", "GlobalInvocationId", "LocalInvocationIndex", "SubgroupLocalInvocationId",
                       "SubgroupId"}
"""Builtins that differ between the invocations of one workgroup."""
VECTOR_BUILTINS = {"LocalInvocationId", "GlobalInvocationId"}
"""Of those, the ones that are vectors: each component is tracked on its own (``GlobalInvocationId.y`` is uniform in
a workgroup one invocation tall)."""
AXES = "xyz"
COMPONENTWISE = {"OpBitcast", "OpUConvert", "OpSConvert", "OpConvertUToF", "OpConvertSToF", "OpCopyObject"}

WORKGROUP_SCOPE = 2


@dataclasses.dataclass(frozen=True)
class SkippableBarrier:
    """One barrier some invocations of a workgroup can skip."""

    function: str
    """The function holding it (``main`` after inlining; a helper's name where glslc kept one)."""
    barrier: int
    """Its position among the function's barriers (0: the first)."""
    branch: str
    """The divergent branch it depends on: its instruction, as disassembled."""
    sources: tuple[str, ...]
    """The builtins (vector ones by component: ``GlobalInvocationId.x``) the branch condition derives from."""

    def skippable_with(self, local_size: tuple[int, int, int]) -> bool:
        """Whether invocations of one workgroup of ``local_size`` can disagree on the branch."""
        for source in self.sources:
            name, _, axis = source.partition(".")
            if (local_size[AXES.index(axis)] if axis else local_size[0] * local_size[1] * local_size[2]) > 1:
                return True
        return False

    def describe(self) -> str:
        axes = sorted({s.partition(".")[2] for s in self.sources if "." in s})
        scalar = [s for s in self.sources if "." not in s]
        when = ("in any workgroup of more than one invocation" if scalar else
                f"when the workgroup has more than one invocation along {' or '.join(axes)}")
        return (f"barrier #{self.barrier} of {self.function} may be skipped by some invocations {when}: it is "
                f"control dependent on `{self.branch}`, whose condition derives from {', '.join(self.sources)}")


class _Analysis:
    """Non-uniform values of a module, to a fixpoint over every function."""

    def __init__(self, insts: list[Inst]):
        self.names = names_of(insts)
        self.constants = {i.result: i.literals[0] for i in insts if i.op == "OpConstant" and i.literals}
        self.taint: dict[str, frozenset[str]] = {}
        self.lanes: dict[str, tuple[frozenset[str], ...]] = {}
        """Vector values whose components are tracked one by one."""
        self.builtin_vectors: set[str] = set()
        for inst in insts:
            if inst.op == "OpDecorate" and inst.literals[:1] == ["BuiltIn"] and inst.literals[1] in INVOCATION_BUILTINS:
                name = inst.literals[1]
                if name in VECTOR_BUILTINS:
                    self.builtin_vectors.add(inst.ids[0])
                    self.lanes[inst.ids[0]] = tuple(frozenset({f"{name}.{a}"}) for a in AXES)
                    self.taint[inst.ids[0]] = frozenset().union(*self.lanes[inst.ids[0]])
                else:
                    self.taint[inst.ids[0]] = frozenset({name})
        self.functions = functions(insts, self.names)
        self.by_id = {i.result: i for i in insts if i.result}
        self.graphs = {}
        for fn in self.functions:
            succ = successors(fn)
            self.graphs[fn.name] = (succ, control_dependences(fn, succ))
        self.base: dict[str, str] = {}
        """Pointer id → the variable it points into."""
        self._run()

    def _of(self, ids: list[str]) -> frozenset[str]:
        found: frozenset[str] = frozenset()
        for i in ids:
            found |= self.taint.get(i, frozenset()) | self.taint.get(self.base.get(i, ""), frozenset())
        return found

    def divergent_blocks(self, fn: Function) -> dict[str, frozenset[str]]:
        """Branch blocks whose condition is non-uniform, with the builtins it derives from."""
        out = {}
        for label, body in fn.blocks.items():
            last = body[-1]
            if last.op in ("OpBranchConditional", "OpSwitch") and last.ids:
                sources = self._of(last.ids[:1])
                if sources:
                    out[label] = sources
        return out

    def _mark(self, target: str | None, sources: frozenset[str]) -> bool:
        if not target or not sources or sources <= self.taint.get(target, frozenset()):
            return False
        self.taint[target] = self.taint.get(target, frozenset()) | sources
        return True

    def _run(self) -> None:
        changed = True
        while changed:
            changed = False
            for fn in self.functions:
                changed |= self._function(fn)

    def _function(self, fn: Function) -> bool:
        _, deps = self.graphs[fn.name]
        divergent = self.divergent_blocks(fn)
        under: dict[str, frozenset[str]] = {}
        for label in fn.order:
            found: frozenset[str] = frozenset()
            for x in ancestors(label, deps):
                found |= divergent.get(x, frozenset())
            under[label] = found
        changed = False
        for label in fn.order:
            for inst in fn.blocks[label]:
                changed |= self._instruction(inst, under, label)
        return changed

    def _set_lanes(self, target: str, lanes: tuple[frozenset[str], ...]) -> bool:
        old = self.lanes.get(target)
        merged = lanes if old is None else tuple(a | b for a, b in zip(old, lanes))
        if merged == old:
            return False
        self.lanes[target] = merged
        self.taint[target] = self.taint.get(target, frozenset()) | frozenset().union(*merged)
        return True

    def _lanewise(self, inst: Inst) -> bool | None:
        """Component-precise propagation where the operands allow it; None where it does not apply."""
        ids, op = inst.ids, inst.op
        if op == "OpLoad" and ids[1] in self.builtin_vectors:
            return self._set_lanes(inst.result, self.lanes[ids[1]])
        if op in ("OpAccessChain", "OpInBoundsAccessChain") and ids[1] in self.builtin_vectors and len(ids) == 3 \
                and ids[2] in self.constants:
            return self._mark(inst.result, self.lanes[ids[1]][int(self.constants[ids[2]])])
        if op in COMPONENTWISE and ids[1] in self.lanes:
            return self._set_lanes(inst.result, self.lanes[ids[1]])
        if op == "OpCompositeExtract" and ids[1] in self.lanes and len(inst.literals) == 1:
            return self._mark(inst.result, self.lanes[ids[1]][int(inst.literals[0])])
        if op == "OpCompositeInsert" and ids[2] in self.lanes and len(inst.literals) == 1:
            lanes = list(self.lanes[ids[2]])
            lanes[int(inst.literals[0])] = self._of([ids[1]])
            return self._set_lanes(inst.result, tuple(lanes))
        if op == "OpVectorInsertDynamic" and ids[1] in self.lanes:
            extra = self._of([ids[2], ids[3]])
            return self._set_lanes(inst.result, tuple(lane | extra for lane in self.lanes[ids[1]]))
        return None

    def _instruction(self, inst: Inst, under: dict[str, frozenset[str]], label: str) -> bool:
        precise = self._lanewise(inst) if inst.result is not None and len(inst.ids) > 1 else None
        if precise is not None:
            return precise
        if inst.op in ("OpAccessChain", "OpInBoundsAccessChain", "OpPtrAccessChain"):
            self.base[inst.result] = self.base.get(inst.ids[1], inst.ids[1])
            return self._mark(inst.result, self._of(inst.ids[2:]) | self.taint.get(inst.ids[1], frozenset()))
        if inst.op == "OpStore":
            return self._mark(self.base.get(inst.ids[0], inst.ids[0]), self._of(inst.ids[1:]) | under[label]
                              | self.taint.get(inst.ids[0], frozenset()))
        if inst.op == "OpPhi":
            parents = inst.ids[2::2]
            return self._mark(inst.result, self._of(inst.ids[1::2]).union(*(under.get(p, frozenset())
                                                                            for p in parents)))
        if inst.op == "OpFunctionCall":
            callee = next((f for f in self.functions if f.name == self.names.get(inst.ids[1], inst.ids[1])), None)
            changed = False
            if callee is not None:
                for param, arg in zip(callee.params, inst.ids[2:]):
                    changed |= self._mark(param, self._of([arg]) | under[label])
            return changed | self._mark(inst.result, self._of(inst.ids[2:]))
        if inst.result is not None and inst.op != "OpVariable":
            return self._mark(inst.result, self._of(inst.ids[1:]))
        return False

    def _barrierfunctions(self) -> set[str]:
        """Functions that hold a workgroup barrier, directly or through calls."""
        holding = set()
        changed = True
        while changed:
            changed = False
            for fn in self.functions:
                if fn.name not in holding and any(self._is_barrier(i, holding) for b in fn.blocks.values() for i in b):
                    holding.add(fn.name)
                    changed = True
        return holding

    def _is_barrier(self, inst: Inst, holding: set[str]) -> bool:
        if inst.op == "OpControlBarrier":
            return self.constants.get(inst.ids[0]) == str(WORKGROUP_SCOPE)
        return inst.op == "OpFunctionCall" and self.names.get(inst.ids[1], inst.ids[1]) in holding

    def skippable(self) -> list[SkippableBarrier]:
        holding = self._barrierfunctions()
        found = []
        for fn in self.functions:
            _, deps = self.graphs[fn.name]
            divergent = self.divergent_blocks(fn)
            count = 0
            for label in fn.order:
                for inst in fn.blocks[label]:
                    if not self._is_barrier(inst, holding):
                        continue
                    culprits = [x for x in ancestors(label, deps) if x in divergent]
                    if culprits:
                        x = min(culprits, key=fn.order.index)
                        found.append(SkippableBarrier(fn.name, count, fn.blocks[x][-1].text,
                                                      tuple(sorted(divergent[x]))))
                    count += 1
        return found


def skippable_barriers(spv: bytes) -> list[SkippableBarrier]:
    """Every workgroup barrier of the module that some invocations can skip (empty: none)."""
    return _Analysis(disassemble(spv)).skippable()
