"""SPIR-V word-level reading, reflection and the transforms that let naga load ET-VK shaders.

Only the handful of instructions vkdiff needs are understood; everything else is
carried through untouched. The transforms keep the shader logic intact:

1. ``bake_spec_constants``: spirv-opt freezes the specialization constants to the
   values ET-VK would pass, and ``OpExecutionMode LocalSize`` is patched to the
   workgroup size (naga reads the execution mode; freezing alone leaves 1,1,1).
2. ``rewrite_combined_samplers``: ``sampler2D``/``sampler3D`` become plain sampled
   images. Valid because generated ET-VK code only uses ``texelFetch``.
3. ``rewrite_integer_smod``: integer ``OpSMod`` (GLSL ``%`` on ``ivec``) becomes
   ``SRem(SRem(a, b) + b, b)``, the same floored remainder, which naga's SPIR-V front end can
   translate (it lowers ``OpSMod`` through ``floor`` and rejects it on integer vectors).
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, Literal

import numpy as np

MAGIC = 0x07230203

OP_NAME = 5
OP_CAPABILITY = 17
OP_EXECUTION_MODE = 16
OP_TYPE_BOOL = 20
OP_TYPE_INT = 21
OP_TYPE_FLOAT = 22
OP_TYPE_VECTOR = 23
OP_TYPE_MATRIX = 24
OP_TYPE_IMAGE = 25
OP_TYPE_SAMPLED_IMAGE = 27
OP_TYPE_ARRAY = 28
OP_TYPE_RUNTIME_ARRAY = 29
OP_TYPE_STRUCT = 30
OP_TYPE_POINTER = 32
OP_CONSTANT = 43
OP_SPEC_CONSTANT_TRUE = 48
OP_SPEC_CONSTANT_FALSE = 49
OP_SPEC_CONSTANT = 50
OP_VARIABLE = 59
OP_LOAD = 61
OP_DECORATE = 71
OP_MEMBER_DECORATE = 72
OP_IMAGE = 100
OP_COPY_OBJECT = 83
_SAMPLING_OPS = frozenset(range(87, 99))
"""OpImageSample*/OpImageFetch/OpImageGather/...: ops that take the sampled image itself."""

EXEC_MODE_LOCAL_SIZE = 17
DEC_RELAXED_PRECISION = 0
DEC_SPEC_ID = 1
DEC_BUILTIN = 11
DEC_NON_WRITABLE = 24
DEC_NON_READABLE = 25
DEC_BINDING = 33
DEC_DESCRIPTOR_SET = 34
DEC_OFFSET = 35
BUILTIN_WORKGROUP_SIZE = 25

SC_UNIFORM_CONSTANT = 0
SC_UNIFORM = 2
SC_PUSH_CONSTANT = 9
SC_STORAGE_BUFFER = 12

# SPIR-V ImageFormat enum → WebGPU texture format (only formats ET-VK declares).
IMAGE_FORMATS = {1: "rgba32float", 2: "rgba16float", 21: "rgba32sint", 22: "rgba16sint",
                 23: "rgba8sint", 30: "rgba32uint", 31: "rgba16uint", 32: "rgba8uint",
                 4: "rgba8unorm", 33: "r32sint", 34: "r32uint", 3: "r32float"}

BindingKind = Literal["storage-buffer", "uniform-buffer", "storage-texture", "sampled-texture"]


class SpirvOptMissingError(FileNotFoundError):
    """spirv-opt is not installed, so no kernel can be specialised (→ ``NOT_RUN``)."""


def spirv_opt() -> str:
    """Path of spirv-opt.

    Raises:
        SpirvOptMissingError: it is not on PATH (names the Debian package).
    """
    path = shutil.which("spirv-opt")
    if path is None:
        raise SpirvOptMissingError("spirv-opt not found: install Debian package 'spirv-tools' "
                                   "(apt-get install spirv-tools)")
    return path


class SpirvError(ValueError):
    """The SPIR-V module is malformed or uses a construct vkdiff cannot transform."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Binding:
    """One descriptor a shader declares, as reflected from SPIR-V."""

    group: int
    """Descriptor set."""
    binding: int
    """Binding number within the set."""
    kind: BindingKind
    """What must be bound there."""
    name: str = ""
    """Variable (or block) name from OpName, when the module kept debug names."""
    dim: str = ""
    """Texture view dimension ("2d", "3d") for textures."""
    format: str = ""
    """WebGPU format for storage textures."""
    sample_type: str = ""
    """"float", "sint" or "uint" for sampled textures."""
    access: str = ""
    """"read-only", "write-only" or "read-write" for storage textures and storage buffers."""
    element: str = ""
    """Scalar type of a storage buffer's array elements (``float32``, ``int32``, ``uint8``…), "" if not an array."""
    combined: bool = False
    """A sampled texture declared as a combined image sampler (``sampler3D``), as ET-VK declares them."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Reflection:
    """What a compute pipeline needs to know about a SPIR-V module."""

    bindings: tuple[Binding, ...]
    """Every descriptor, sorted by (group, binding)."""
    immediate_size: int
    """Bytes of the push-constant block (0 when there is none)."""
    spec_ids: tuple[int, ...]
    """SpecIds declared by the module."""
    local_size: tuple[int, int, int]
    """The ``LocalSize`` execution mode as compiled."""


def words_of(spv: bytes) -> np.ndarray:
    """Return the module as uint32 words, checking the magic number."""
    if len(spv) % 4 or len(spv) < 20:
        raise SpirvError(f"SPIR-V length {len(spv)} is not a whole number of words")
    words = np.frombuffer(spv, dtype="<u4").copy()
    if words[0] != MAGIC:
        raise SpirvError(f"not a SPIR-V module: magic {words[0]:#x}")
    return words


def instructions(words: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """Yield ``(offset, opcode, operands)`` for every instruction after the header."""
    i = 5
    n = len(words)
    while i < n:
        count = int(words[i]) >> 16
        if count == 0 or i + count > n:
            raise SpirvError(f"bad instruction word count at word {i}")
        yield i, int(words[i]) & 0xFFFF, words[i + 1 : i + count]
        i += count


@functools.lru_cache(maxsize=1024)
def relaxed_precision(spv: bytes) -> bool:
    """Whether the module decorates anything ``RelaxedPrecision`` (GLSL ``mediump``): a device may then compute
    those values in float16."""
    return any(op == OP_DECORATE and len(operands) >= 2 and int(operands[1]) == DEC_RELAXED_PRECISION
               for _, op, operands in instructions(words_of(spv)))


def _string(operands: np.ndarray) -> str:
    raw = operands.tobytes()
    return raw[: raw.index(b"\0")].decode() if b"\0" in raw else raw.decode()


class _Module:
    """Indexes of one module: types, decorations, names, variables."""

    def __init__(self, words: np.ndarray):
        self.types: dict[int, tuple[int, np.ndarray]] = {}
        self.decorations: dict[int, dict[int, list[int]]] = {}
        self.member_offsets: dict[int, dict[int, int]] = {}
        self.member_flags: dict[int, dict[int, set[int]]] = {}
        """Struct → member → its NonWritable / NonReadable decorations."""
        self.names: dict[int, str] = {}
        self.variables: list[tuple[int, int, int]] = []
        self.constants: dict[int, int] = {}
        self.spec_ids: list[int] = []
        self.local_size = (1, 1, 1)
        for _, op, ops in instructions(words):
            if OP_TYPE_BOOL <= op <= OP_TYPE_POINTER:
                self.types[int(ops[0])] = (op, ops)
            elif op == OP_DECORATE:
                self.decorations.setdefault(int(ops[0]), {})[int(ops[1])] = [int(v) for v in ops[2:]]
                if int(ops[1]) == DEC_SPEC_ID:
                    self.spec_ids.append(int(ops[2]))
            elif op == OP_MEMBER_DECORATE and int(ops[2]) == DEC_OFFSET:
                self.member_offsets.setdefault(int(ops[0]), {})[int(ops[1])] = int(ops[3])
            elif op == OP_MEMBER_DECORATE and int(ops[2]) in (DEC_NON_WRITABLE, DEC_NON_READABLE):
                self.member_flags.setdefault(int(ops[0]), {}).setdefault(int(ops[1]), set()).add(int(ops[2]))
            elif op == OP_NAME:
                self.names[int(ops[0])] = _string(ops[1:])
            elif op == OP_VARIABLE:
                self.variables.append((int(ops[0]), int(ops[1]), int(ops[2])))
            elif op in (OP_CONSTANT, OP_SPEC_CONSTANT):
                self.constants[int(ops[1])] = int(ops[2])
            elif op == OP_EXECUTION_MODE and int(ops[1]) == EXEC_MODE_LOCAL_SIZE:
                self.local_size = (int(ops[2]), int(ops[3]), int(ops[4]))

    def size_of(self, type_id: int) -> int:
        """Byte size of a type under the std430/push-constant layout glslang emitted."""
        op, ops = self.types[type_id]
        if op in (OP_TYPE_INT, OP_TYPE_FLOAT):
            return int(ops[1]) // 8
        if op == OP_TYPE_BOOL:
            return 4
        if op in (OP_TYPE_VECTOR, OP_TYPE_MATRIX):
            return self.size_of(int(ops[1])) * int(ops[2])
        if op == OP_TYPE_ARRAY:
            stride = self.decorations.get(type_id, {}).get(6, [self.size_of(int(ops[1]))])[0]
            return stride * self.constants[int(ops[2])]
        if op == OP_TYPE_STRUCT:
            members = [int(m) for m in ops[1:]]
            offsets = self.member_offsets.get(type_id, {})
            last = len(members) - 1
            return offsets.get(last, 0) + self.size_of(members[last])
        raise SpirvError(f"cannot size SPIR-V type opcode {op}")

    def pointee(self, pointer_type: int) -> int:
        op, ops = self.types[pointer_type]
        if op != OP_TYPE_POINTER:
            raise SpirvError(f"variable type %{pointer_type} is not a pointer")
        return int(ops[2])


def _sample_type(module: _Module, component_type: int) -> str:
    op, ops = module.types[component_type]
    if op == OP_TYPE_FLOAT:
        return "float"
    return "sint" if int(ops[2]) else "uint"


def _scalar_name(module: _Module, type_id: int) -> str:
    """numpy-style name of a scalar, vector or matrix type's component (``float16``, ``int32``, ``uint8``)."""
    op, ops = module.types[type_id]
    while op in (OP_TYPE_VECTOR, OP_TYPE_MATRIX):
        op, ops = module.types[int(ops[1])]
    if op == OP_TYPE_FLOAT:
        return f"float{int(ops[1])}"
    if op == OP_TYPE_INT:
        return f"{'int' if int(ops[2]) else 'uint'}{int(ops[1])}"
    return ""


def _buffer_element(module: _Module, block: int) -> str:
    """Element type of the array a storage-buffer block ends with ("" for a block of plain members)."""
    op, ops = module.types[block]
    if op != OP_TYPE_STRUCT or len(ops) < 2:
        return ""
    last_op, last_ops = module.types[int(ops[-1])]
    if last_op not in (OP_TYPE_RUNTIME_ARRAY, OP_TYPE_ARRAY):
        return ""
    return _scalar_name(module, int(last_ops[1]))


def _image_binding(module: _Module, var: int, image_type: int, sampled_wrapper: bool, **where) -> Binding:
    _, ops = module.types[image_type]
    dim = {1: "2d", 2: "3d", 0: "1d"}.get(int(ops[2]), "")
    sampled = int(ops[6])
    if sampled_wrapper or sampled == 1:
        return Binding(kind="sampled-texture", dim=dim, sample_type=_sample_type(module, int(ops[1])),
                       combined=sampled_wrapper, **where)
    decos = module.decorations.get(var, {})
    access = ("read-only" if DEC_NON_WRITABLE in decos else
              "write-only" if DEC_NON_READABLE in decos else "read-write")
    fmt = IMAGE_FORMATS.get(int(ops[7]))
    if fmt is None:
        raise SpirvError(f"storage image %{var} uses SPIR-V image format {int(ops[7])}, unknown to vkdiff")
    return Binding(kind="storage-texture", dim=dim, format=fmt, access=access, **where)


def _buffer_access(module: _Module, var: int, block: int) -> str:
    """``read-only`` / ``write-only`` / ``read-write`` of a storage buffer, from ``NonWritable`` / ``NonReadable`` on
    the variable or on every member of its block (glslang's ``readonly`` / ``writeonly``)."""
    _, ops = module.types[block]
    members = range(len(ops) - 1)
    flags = module.member_flags.get(block, {})
    own = set(module.decorations.get(var, {}))
    if DEC_NON_WRITABLE in own or (members and all(DEC_NON_WRITABLE in flags.get(m, ()) for m in members)):
        return "read-only"
    if DEC_NON_READABLE in own or (members and all(DEC_NON_READABLE in flags.get(m, ()) for m in members)):
        return "write-only"
    return "read-write"


CAPABILITY_NAMES = {9: "Float16", 10: "Float64", 11: "Int64", 22: "Int16", 39: "Int8", 49: "StorageImageExtendedFormats",
                    55: "StorageImageReadWithoutFormat", 56: "StorageImageWriteWithoutFormat",
                    61: "GroupNonUniform", 62: "GroupNonUniformVote", 63: "GroupNonUniformArithmetic",
                    64: "GroupNonUniformBallot", 65: "GroupNonUniformShuffle", 66: "GroupNonUniformShuffleRelative",
                    67: "GroupNonUniformClustered", 68: "GroupNonUniformQuad",
                    4433: "StorageBuffer16BitAccess", 4434: "UniformAndStorageBuffer16BitAccess",
                    4435: "StoragePushConstant16", 4448: "StorageBuffer8BitAccess",
                    4449: "UniformAndStorageBuffer8BitAccess", 4450: "StoragePushConstant8",
                    5345: "VulkanMemoryModel", 6016: "DotProductInputAll", 6017: "DotProductInput4x8Bit",
                    6018: "DotProductInput4x8BitPacked", 6019: "DotProduct", 6022: "CooperativeMatrixKHR"}
"""SPIR-V capability ids vkdiff names in messages."""


ACCESS_CHAINS = (65, 66, 67)
"""``OpAccessChain``, ``OpInBoundsAccessChain``, ``OpPtrAccessChain``."""
OP_STORE = 62


def access_at(spv: bytes, index: int) -> tuple[int, str] | None:
    """The binding a load or store accesses, and which (``"read"``/``"write"``), for the ``index``-th instruction
    after the header (0-based: the *Shader Instruction Index* of the layer's GPU-assisted reports); None when that
    instruction is no load or store through a descriptor."""
    words = words_of(spv)
    bases: dict[int, int] = {}
    for position, (_, op, ops) in enumerate(instructions(words)):
        if op in ACCESS_CHAINS or op == OP_COPY_OBJECT:
            bases[int(ops[1])] = int(ops[2])
        if position != index:
            continue
        if op not in (OP_LOAD, OP_STORE):
            return None
        pointer = int(ops[2]) if op == OP_LOAD else int(ops[0])
        while pointer in bases:
            pointer = bases[pointer]
        binding = _Module(words).decorations.get(pointer, {}).get(DEC_BINDING)
        return (binding[0], "read" if op == OP_LOAD else "write") if binding else None
    return None


def capabilities(spv: bytes) -> set[str]:
    """Names of the capabilities a module declares (ids unknown to ``CAPABILITY_NAMES`` as numbers)."""
    return {CAPABILITY_NAMES.get(int(ops[0]), str(int(ops[0])))
            for _, op, ops in instructions(words_of(spv)) if op == OP_CAPABILITY}


def spec_constant_types(spv: bytes) -> dict[int, tuple[str, int]]:
    """SpecId → (``bool``/``int``/``uint``/``float``, bits) of each specialization constant a module declares."""
    return dict(_spec_constant_types(bytes(spv)))


@functools.lru_cache(maxsize=1024)
def _spec_constant_types(spv: bytes) -> tuple[tuple[int, tuple[str, int]], ...]:
    """Parsed once per module: pipelines of one variant differ only in their constants."""
    words = words_of(spv)
    module = _parsed(spv)
    ids = {target: values[0] for target, decos in module.decorations.items()
           for kind, values in decos.items() if kind == DEC_SPEC_ID}
    found: dict[int, tuple[str, int]] = {}
    for _, op, ops in instructions(words):
        if op in (OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE) and int(ops[1]) in ids:
            found[ids[int(ops[1])]] = ("bool", 32)
        elif op == OP_SPEC_CONSTANT and int(ops[1]) in ids:
            type_op, type_ops = module.types[int(ops[0])]
            kind = "float" if type_op == OP_TYPE_FLOAT else ("int" if int(type_ops[2]) else "uint")
            found[ids[int(ops[1])]] = (kind, int(type_ops[1]))
    return tuple(found.items())


def reflect(spv: bytes) -> Reflection:
    """Reflect descriptors, push-constant size, SpecIds and LocalSize of a module (parsed once per module)."""
    return _reflect(bytes(spv))


@functools.lru_cache(maxsize=4)
def _parsed(spv: bytes) -> "_Module":
    """A module parsed once for both its reflection and its constants' types (asked for one after the other)."""
    return _Module(words_of(spv))


@functools.lru_cache(maxsize=1024)
def _reflect(spv: bytes) -> Reflection:
    module = _parsed(spv)
    bindings, immediate_size = [], 0
    for type_id, var, storage in module.variables:
        pointee = module.pointee(type_id)
        if storage == SC_PUSH_CONSTANT:
            immediate_size = max(immediate_size, module.size_of(pointee))
            continue
        decos = module.decorations.get(var, {})
        if DEC_BINDING not in decos:
            continue
        where = dict(group=decos.get(DEC_DESCRIPTOR_SET, [0])[0], binding=decos[DEC_BINDING][0],
                     name=module.names.get(var, "") or module.names.get(pointee, ""))
        op, ops = module.types[pointee]
        if storage == SC_STORAGE_BUFFER or (storage == SC_UNIFORM and 3 in module.decorations.get(pointee, {})):
            bindings.append(Binding(kind="storage-buffer", element=_buffer_element(module, pointee),
                                    access=_buffer_access(module, var, pointee), **where))
        elif storage == SC_UNIFORM:
            bindings.append(Binding(kind="uniform-buffer", **where))
        elif op == OP_TYPE_SAMPLED_IMAGE:
            bindings.append(_image_binding(module, var, int(ops[1]), True, **where))
        elif op == OP_TYPE_IMAGE:
            bindings.append(_image_binding(module, var, pointee, False, **where))
        else:
            raise SpirvError(f"binding {where['binding']} has an unsupported type (opcode {op})")
    bindings.sort(key=lambda b: (b.group, b.binding))
    return Reflection(bindings=tuple(bindings), immediate_size=immediate_size,
                      spec_ids=tuple(sorted(module.spec_ids)), local_size=module.local_size)


def rewrite_combined_samplers(spv: bytes) -> bytes:
    """Turn combined image samplers into plain sampled images (``texelFetch`` only).

    The pointer to ``OpTypeSampledImage`` is re-pointed at its image type, loads of it
    produce the image, and each ``OpImage`` that extracted the image becomes an
    ``OpCopyObject`` of the loaded image (same word count, so no offsets move).
    """
    words = words_of(spv)
    module = _Module(words)
    sampled = {t: int(ops[1]) for t, (op, ops) in module.types.items() if op == OP_TYPE_SAMPLED_IMAGE}
    if not sampled:
        return spv
    loaded: set[int] = set()
    for at, op, ops in instructions(words):
        if op == OP_TYPE_POINTER and int(ops[2]) in sampled:
            words[at + 3] = sampled[int(ops[2])]
        elif op == OP_LOAD and int(ops[0]) in sampled:
            words[at + 1] = sampled[int(ops[0])]
            loaded.add(int(ops[1]))
        elif op == OP_IMAGE:
            if int(ops[2]) not in loaded:
                raise SpirvError("OpImage on a sampled image that was not loaded from a variable")
            words[at] = (4 << 16) | OP_COPY_OBJECT
        elif op in _SAMPLING_OPS and int(ops[2]) in loaded:
            raise SpirvError("a combined image sampler is used for sampling, not texelFetch: cannot rewrite")
    return words.tobytes()


OP_IADD, OP_SREM, OP_SMOD = 128, 138, 139


def rewrite_integer_smod(spv: bytes) -> bytes:
    """Replace each ``OpSMod`` by ``t = SRem(a, b); r = SRem(t + b, b)`` (two fresh ids, bound raised).

    ``OpSMod`` is the floored remainder (sign of ``b``); ``SRem`` truncates (sign of ``a``); adding ``b``
    to a truncated remainder and taking it again gives the floored one for either sign of ``a`` and ``b``
    (exact unless ``|b| > 2^30``, where ``t + b`` can wrap). ``OpSMod`` applies to integers only
    (``OpFMod`` is the float form), so nothing else changes.
    """
    words = words_of(spv)
    found = [(at, ops) for at, op, ops in instructions(words) if op == OP_SMOD]
    if not found:
        return spv
    bound = int(words[3])
    parts, last = [words[:5]], 5
    for at, ops in found:
        result_type, result, a, b = (int(v) for v in ops)
        t, shifted = bound, bound + 1
        bound += 2
        parts += [words[last:at], np.array([(5 << 16) | OP_SREM, result_type, t, a, b,
                                            (5 << 16) | OP_IADD, result_type, shifted, t, b,
                                            (5 << 16) | OP_SREM, result_type, result, shifted, b], np.uint32)]
        last = at + 5
    parts.append(words[last:])
    merged = np.concatenate(parts).astype("<u4")
    merged[3] = bound
    return merged.tobytes()


OP_SPEC_CONSTANT_OP, OP_FCONVERT = 52, 115


def fold_float_conversions(spv: bytes) -> bytes:
    """Replace each ``OpSpecConstantOp FConvert`` of a float constant by the converted ``OpConstant``.

    Baked spec constants leave ``OpSpecConstantOp %half FConvert %float_const`` behind (SDPA's
    ``inv_scale`` in its half buffer shaders); spirv-opt's folding keeps it and naga rejects it.
    The value is converted as a Vulkan float32 → float16 conversion rounds (to nearest even).
    """
    words = words_of(spv)
    widths: dict[int, int] = {}
    values: dict[int, tuple[int, int]] = {}
    found = []
    for at, op, ops in instructions(words):
        if op == OP_TYPE_FLOAT:
            widths[int(ops[0])] = int(ops[1])
        elif op == OP_CONSTANT and int(ops[0]) in widths and len(ops) == 3:
            values[int(ops[1])] = (widths[int(ops[0])], int(ops[2]))
        elif op == OP_SPEC_CONSTANT_OP and int(ops[2]) == OP_FCONVERT and int(ops[3]) in values:
            found.append((at, int(ops[0]), int(ops[1]), int(ops[3])))
    if not found:
        return spv
    parts, last = [words[:5]], 5
    for at, result_type, result, operand in found:
        width, bits = values[operand]
        value = np.array([bits], np.uint32).view(np.float32)[0] if width == 32 else \
            np.array([bits], np.uint16).view(np.float16)[0]
        target = widths.get(result_type)
        if target not in (16, 32):
            return spv
        converted = int((np.float16 if target == 16 else np.float32)(value).view(
            np.uint16 if target == 16 else np.uint32))
        parts += [words[last:at], np.array([(4 << 16) | OP_CONSTANT, result_type, result, converted], np.uint32)]
        last = at + 5
    parts.append(words[last:])
    return np.concatenate(parts).astype("<u4").tobytes()


FINITE_FOR_INFINITE = {32: {0x7F800000: 0x7F7FFFFF, 0xFF800000: 0xFF7FFFFF}, 16: {0x7C00: 0x7BFF, 0xFC00: 0xFBFF}}
"""Bits of +inf / -inf by float width → the largest finite value of that sign."""


def clamp_infinite_constants(spv: bytes) -> tuple[bytes, int]:
    """Replace ±inf float constants by ±the largest finite value; returns the module and how many changed.

    naga rejects infinite literals ("Float literal is infinite"), which ET-VK's SDPA shaders
    use as the start of a running max and as the masked score (``-1.0/0.0``). For finite
    data the results are identical (``exp(-max - m)`` is 0 as ``exp(-inf)`` is); they differ
    only where an infinity must survive arithmetic (a row with every score masked).
    """
    words = words_of(spv)
    widths: dict[int, int] = {}
    changed = 0
    for at, op, ops in instructions(words):
        if op == OP_TYPE_FLOAT:
            widths[int(ops[0])] = int(ops[1])
        elif op == OP_CONSTANT and int(ops[0]) in widths:
            table = FINITE_FOR_INFINITE.get(widths[int(ops[0])], {})
            bits = int(words[at + 3])
            if bits in table:
                words[at + 3] = table[bits]
                changed += 1
    return (words.tobytes(), changed) if changed else (spv, 0)


def set_local_size(spv: bytes, local_size: tuple[int, int, int]) -> bytes:
    """Patch ``OpExecutionMode LocalSize`` (naga ignores the WorkGroupSize builtin)."""
    words = words_of(spv)
    for at, op, ops in instructions(words):
        if op == OP_EXECUTION_MODE and int(ops[1]) == EXEC_MODE_LOCAL_SIZE:
            words[at + 3 : at + 6] = local_size
    return words.tobytes()


def _spec_value(value: int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def bake_spec_constants(spv: bytes, values: dict[int, int | float | bool],
                        local_size: tuple[int, int, int]) -> bytes:
    """Freeze spec constants to ``values`` (by SpecId) and the workgroup size to ``local_size``.

    SpecIds 0–2 are ET-VK's workgroup size ids; ``values`` for ids the module does not
    declare are ignored (ET-VK passes the same list to several shaders).
    """
    declared = set(reflect(spv).spec_ids)
    values = {**dict(zip((0, 1, 2), local_size)), **values}
    chosen = " ".join(f"{k}:{_spec_value(v)}" for k, v in sorted(values.items()) if k in declared)
    opt = spirv_opt()
    with tempfile.TemporaryDirectory(prefix="vkdiff-spv-") as tmp:
        src, dst = Path(tmp, "in.spv"), Path(tmp, "out.spv")
        src.write_bytes(spv)
        args = [opt, str(src), "-o", str(dst), "--skip-validation"]
        if chosen:
            args.append(f"--set-spec-const-default-value={chosen}")
        args += ["--freeze-spec-const", "--fold-spec-const-op-composite"]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode:
            raise SpirvError(f"spirv-opt failed: {done.stderr.strip()}")
        baked = dst.read_bytes()
    return set_local_size(baked, local_size)
