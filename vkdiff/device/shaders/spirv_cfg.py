"""Control flow of a SPIR-V module as glslc built it, for the static checks (``uniformity``, ``bounds``): the
module disassembled (``spirv-dis``), its functions' blocks, successors, post-dominators and control dependences."""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path


class DisassemblerMissingError(FileNotFoundError):
    """spirv-dis is not installed."""


@dataclasses.dataclass
class Inst:
    """One instruction: its opcode, result id, id operands, literals and text."""

    op: str
    result: str | None
    ids: list[str]
    """Every id operand (the result type first, where there is one)."""
    literals: list[str]
    text: str


@dataclasses.dataclass
class Function:
    """One function: its name, parameters, and blocks in order."""

    name: str
    params: list[str]
    blocks: dict[str, list[Inst]]
    order: list[str]


def disassemble(spv: bytes) -> list[Inst]:
    """The module as instructions (``spirv-dis --raw-id``).

    Raises:
        DisassemblerMissingError: spirv-dis is not installed (names the Debian package).
    """
    exe = shutil.which("spirv-dis")
    if exe is None:
        raise DisassemblerMissingError("spirv-dis not found: install Debian package 'spirv-tools'")
    with tempfile.TemporaryDirectory(prefix="vkdiff-dis-") as tmp:
        path = Path(tmp, "m.spv")
        path.write_bytes(spv)
        text = subprocess.run([exe, "--raw-id", "--no-header", "--no-indent", str(path)], capture_output=True,
                              text=True, check=True).stdout
    out = []
    for line in text.splitlines():
        tokens = shlex.split(line, posix=False)
        if not tokens:
            continue
        result = None
        if len(tokens) > 2 and tokens[1] == "=":
            result, tokens = tokens[0], tokens[2:]
        out.append(Inst(tokens[0], result, [t for t in tokens[1:] if t.startswith("%")],
                         [t for t in tokens[1:] if not t.startswith("%")], line.strip()))
    return out


def functions(insts: list[Inst], names: dict[str, str]) -> list[Function]:
    functions: list[Function] = []
    current: Function | None = None
    block = None
    for inst in insts:
        if inst.op == "OpFunction":
            current = Function(names.get(inst.result, inst.result), [], {}, [])
            functions.append(current)
        elif current is None:
            continue
        elif inst.op == "OpFunctionParameter":
            current.params.append(inst.result)
        elif inst.op == "OpLabel":
            block = inst.result
            current.blocks[block] = []
            current.order.append(block)
        elif inst.op == "OpFunctionEnd":
            current, block = None, None
        elif block is not None:
            current.blocks[block].append(inst)
    return functions


def successors(fn: Function) -> dict[str, list[str]]:
    succ = {}
    for label, body in fn.blocks.items():
        last = body[-1]
        if last.op == "OpBranch":
            succ[label] = [last.ids[0]]
        elif last.op == "OpBranchConditional":
            succ[label] = last.ids[1:3]
        elif last.op == "OpSwitch":
            succ[label] = last.ids[1:]
        else:
            succ[label] = []
    return succ


def post_dominators(fn: Function, succ: dict[str, list[str]]) -> dict[str, set[str]]:
    """Each block's post-dominators (itself included), exits joined to one virtual exit."""
    blocks = set(fn.order)
    pdom = {b: set(blocks) for b in blocks}
    for b in blocks:
        if not succ[b]:
            pdom[b] = {b}
    changed = True
    while changed:
        changed = False
        for b in reversed(fn.order):
            if not succ[b]:
                continue
            new = set.intersection(*(pdom[s] for s in succ[b])) | {b}
            if new != pdom[b]:
                pdom[b], changed = new, True
    return pdom


def control_dependences(fn: Function, succ: dict[str, list[str]]) -> dict[str, set[str]]:
    """Block → the branch blocks it is directly control dependent on."""
    pdom = post_dominators(fn, succ)
    deps: dict[str, set[str]] = {b: set() for b in fn.order}
    for x in fn.order:
        if len(succ[x]) < 2:
            continue
        for s in succ[x]:
            for b in pdom[s]:
                if b == x or b not in pdom[x]:
                    deps[b].add(x)
    return deps


def ancestors(block: str, deps: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), [block]
    while todo:
        for x in deps[todo.pop()]:
            if x not in seen:
                seen.add(x)
                todo.append(x)
    return seen


def names_of(insts: list[Inst]) -> dict[str, str]:
    """Id → its ``OpName`` (the entry point's name for ``main``'s function)."""
    names = {i.ids[0]: i.literals[0].strip('"') for i in insts if i.op == "OpName" and i.literals}
    names.update({i.ids[0]: i.literals[1].strip('"') for i in insts if i.op == "OpEntryPoint" and len(i.literals) > 1})
    return names
