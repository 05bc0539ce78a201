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

An ETRecord is a zip of JSON exported programs and ``torch.save`` artifacts, and parsing
it can run code in two places that look like data. ExecuTorch's export deserializer
passes every SymInt/SymBool ``expr_str`` to ``sympy.sympify``, which evaluates Python; and
``torch.fx`` pastes placeholder and attribute names into the Python source it generates
and executes for every graph module (a placeholder named ``x=__import__('os')...``
runs as a default argument). ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` covers neither: it only
keeps ``torch.load`` of the state dicts and example inputs to tensors and containers. So
``read_etrecord`` reads the file once into memory (a regular file, its members' declared
sizes within vkdiff's host budget), parses every member ExecuTorch will deserialize as
JSON of bounded depth, JSON strings nested inside included, and refuses any
``expr_str`` outside ``vkdiff.lowering.sym_exprs``'s grammar, any node or argument name
that is not a Python identifier, any attribute path (``parameter_name``, ``fqn``, ...)
with characters beyond ``[A-Za-z0-9_.@-]`` and any ``as_operator`` outside the op
namespaces. Only then does ``parse_etrecord`` see those same bytes, with
``export_serialize``'s ``sympy`` swapped for a proxy whose ``sympify`` applies the grammar
again (this also covers the fake tensors the ``torch.save`` artifacts may rebuild from
JSON). After the parse, re-lowering reaches only registered operators: the deserializer
accepts node targets that are ``OpOverload``, higher-order or symbolic-size operators,
and a callable argument other than an operator fails ``torch.fx``'s code generation.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import reprlib
import zipfile
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Literal

from vkdiff.capture import quiet_libraries
from vkdiff.datamodel import Program
from vkdiff.datamodel.budget import BudgetError, check_budget
from vkdiff.datamodel.files import NotRegularError, read_regular
from vkdiff.lowering import sym_exprs
from vkdiff.lowering.edge import LowerError, memoise_vulkan_patterns, stage, weights_only
from vkdiff.lowering.sources import delegate_sources

MAX_MEMBERS = 10_000
"""Most zip members an ETRecord may have (one per artifact; a real one has about a dozen per method)."""
MAX_JSON_DEPTH = 200
"""Deepest JSON nesting admitted, counting JSON strings nested in JSON (real ETRecords: under 40)."""
SHOWN = 60
"""Characters of an offending value a message quotes."""

EXPORTED_PROGRAM = "exported_program"
EDGE_PROGRAM = "edge_dialect_exported_program"
JSON_MEMBERS = frozenset({"debug_handle_map", "delegate_map", "instruction_id_to_num_outs_map", "export_graph_id"})
OPAQUE_MEMBERS = frozenset({"ETRECORD_V0", "reference_outputs", "representative_inputs"})
"""ExecuTorch's ``ETRecordReservedFileNames`` that are not programs (``torch.load`` reads the last two)."""
ARTIFACT_SUFFIXES = ("state_dict", "constants", "example_inputs")

NAME_KEYS = frozenset({"name", "as_name"})
"""Fields ``torch.fx`` may paste into generated code: placeholder names, node names, higher-order kwargs."""
PATH_KEYS = frozenset({"parameter_name", "buffer_name", "tensor_constant_name", "custom_obj_name", "user_input_name",
                       "fqn", "class_fqn"})
"""Attribute paths: unlifting turns them into ``get_attr`` targets, which ``torch.fx`` quotes into code."""
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,1023}", re.ASCII)
ATTRIBUTE_PATH = re.compile(r"[A-Za-z0-9_.@-]{0,1024}", re.ASCII)
OPERATOR = re.compile(r"(?:torch\.ops|executorch\.exir\.dialects\.(?:edge|backend)\.ops|_operator)"
                      r"(?:\.[A-Za-z0-9_]+){1,8}", re.ASCII)
_JSON_START = re.compile(r"[ \t\n\r]*[\[{]")
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError, OSError)
"""What Python's zipfile raises on a damaged archive (a bad header, CRC, compression method or length)."""

Kind = Literal["program", "json", "opaque"]


class EtrecordError(ValueError):
    """An ETRecord that cannot be read, is refused, or does not belong to the program (one line)."""


def shown(value: object, limit: int = SHOWN) -> str:
    """``value`` quoted for a one-line message: at most ``limit`` characters, control characters escaped.

    Example::

        >>> print(shown("16*s27\\n\\x1b[2J" + "x" * 80, limit=12))
        "16*s27\\n\\x1b[2Jx…"
    """
    text = value if isinstance(value, str) else reprlib.repr(value)
    cut = text[:limit]
    body = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut)
    return f'"{body}{"…" if len(text) > limit else ""}"'


class CheckedSympy:
    """``sympy`` as ExecuTorch's export deserializer sees it during ``read_etrecord``: ``sympify`` evaluates only
    what ``sym_exprs`` admits, everything else is sympy's own."""

    def __init__(self, real: ModuleType, path: Path) -> None:
        self._real = real
        self._path = path

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def sympify(self, text: object, *args: Any, **kwargs: Any) -> Any:
        """``sympy.sympify`` of an expression torch.export writes; anything else is refused before Python sees it.

        Raises:
            EtrecordError: ``text`` is outside the grammar.
        """
        reason = sym_exprs.refusal(text)
        if reason is not None:
            raise EtrecordError(f"--etrecord {self._path}: symbolic size {shown(text)} is not an expression "
                                f"torch.export writes ({reason}); ExecuTorch met it while parsing, outside the JSON "
                                f"vkdiff checks first (a fake tensor in a torch.save artifact); refusing to evaluate "
                                f"it")
        return self._real.sympify(text, *args, **kwargs)


@contextlib.contextmanager
def checked_sympify(path: Path) -> Iterator[None]:
    """Inside, ``executorch.exir.serde.export_serialize`` reaches sympy through ``CheckedSympy`` (restored after)."""
    from executorch.exir.serde import export_serialize

    real = export_serialize.sympy
    export_serialize.sympy = CheckedSympy(real, path)
    try:
        yield
    finally:
        export_serialize.sympy = real


def read_etrecord(path: Path) -> Any:
    """executorch's ``parse_etrecord`` on bytes vkdiff has checked, evaluating nothing the file chose.

    Raises:
        EtrecordError: not a regular file, over the memory budget, not an ETRecord, or a member refused (one line
            naming the file, the member and the value).
    """
    data = read_regular_file(path)
    for member, kind, blob in json_members(data, path):
        check_json_member(blob, member, kind, path)
    return parse_checked(data, path)


def json_members(data: bytes, path: Path) -> Iterator[tuple[str, Kind, bytes]]:
    """(name, kind, bytes) of every zip entry ``parse_etrecord`` reads as JSON, duplicated names included.

    Raises:
        EtrecordError: a damaged zip, too many members, or sizes over the budget (before any member is read).
    """
    with open_zip(data, path) as archive:
        for info in checked_members(archive, path):
            kind = member_kind(info.filename)
            if kind != "opaque":
                yield info.filename, kind, read_member(archive, info, path)


def open_zip(data: bytes, path: Path) -> zipfile.ZipFile:
    """The zip in ``data``.

    Raises:
        EtrecordError: not a zip, or a damaged directory.
    """
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except _ZIP_ERRORS as exc:
        raise EtrecordError(damaged(path, exc)) from None


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> bytes:
    """One member's bytes; zipfile stops at its declared size, already within the budget.

    Raises:
        EtrecordError: a damaged header, CRC, compression method or length.
    """
    try:
        return archive.read(info)
    except _ZIP_ERRORS as exc:
        raise EtrecordError(damaged(path, exc)) from None


def damaged(path: Path, exc: BaseException) -> str:
    """The one line for a zip that Python's zipfile cannot read."""
    return f"--etrecord {path}: not a readable ETRecord (a damaged zip: {type(exc).__name__}: " \
           f"{shown(first_line(exc), 200)})"


def read_regular_file(path: Path) -> bytes:
    """The bytes of ``path``, read once, when it is a regular file within the host budget.

    Raises:
        EtrecordError: it cannot be opened, is not a regular file (a FIFO is refused without waiting on it), or is
            larger than the budget.
    """
    try:
        return read_regular(path, f"--etrecord {path}")
    except NotRegularError as exc:
        raise EtrecordError(f"{exc}; give the .etrecord file ExecuTorch saved") from None
    except BudgetError as exc:
        raise EtrecordError(str(exc)) from None


def within_budget(nbytes: int, what: str) -> None:
    """``check_budget``, its refusal (or a malformed ``$VKDIFF_MEMORY_BUDGET``) as ``EtrecordError``."""
    try:
        check_budget(nbytes, what)
    except BudgetError as exc:
        raise EtrecordError(str(exc)) from None


def checked_members(archive: zipfile.ZipFile, path: Path) -> list[zipfile.ZipInfo]:
    """Every entry of the zip (duplicated names included), once their count and declared uncompressed sizes fit.

    Raises:
        EtrecordError: too many members, sizes over the budget, or an encrypted member.
    """
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise EtrecordError(f"--etrecord {path}: {len(infos)} zip members, over the {MAX_MEMBERS} an ETRecord may have")
    within_budget(sum(info.file_size for info in infos), f"--etrecord {path} (its {len(infos)} members uncompressed)")
    for info in infos:
        if info.flag_bits & 0x1:
            raise EtrecordError(f"--etrecord {path}: member {label(info.filename)} is encrypted; ETRecords never are")
    return infos


def member_kind(name: str) -> Kind:
    """How ``parse_etrecord`` reads the member ``name``: ``deserialize`` (a program), ``json.loads``, or neither.

    Mirrors the branches of ExecuTorch's ``parse_etrecord``, including its catch-all: any other name that does not
    end like an artifact is a graph-map program.

    Example::

        >>> [member_kind(n) for n in ("exported_program", "edge_dialect_exported_program/forward",
        ...                           "edge_dialect_exported_program/forward_constants", "delegate_map", "g/x")]
        ['program', 'program', 'opaque', 'json', 'program']
    """
    if name in (EXPORTED_PROGRAM, EDGE_PROGRAM):
        return "program"
    if name in JSON_MEMBERS:
        return "json"
    if name in OPAQUE_MEMBERS:
        return "opaque"
    if name.startswith(f"{EDGE_PROGRAM}/"):
        return "opaque" if name.endswith(tuple(f"_{s}" for s in ARTIFACT_SUFFIXES)) else "program"
    return "opaque" if name.endswith(ARTIFACT_SUFFIXES) else "program"


def check_json_member(blob: bytes, member: str, kind: Kind, path: Path) -> None:
    """Parse a JSON member and ``walk`` it.

    Raises:
        EtrecordError: not UTF-8 JSON, nested too deep, or a value refused.
    """
    where = f"--etrecord {path}: member {label(member)}"
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError:
        raise EtrecordError(f"{where} is not UTF-8 JSON") from None
    walk(load_json(text, where), where, program=kind == "program")


def walk(document: Any, where: str, *, program: bool) -> None:
    """Visit every value of ``document`` and of the JSON strings inside it (ExecuTorch decodes some: lowered
    modules, ``from_node``, tree specs), bounding the depth; in a program, ``check_program_value`` each field.

    Raises:
        EtrecordError: nested deeper than ``MAX_JSON_DEPTH``, or a field refused.
    """
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)) and depth > MAX_JSON_DEPTH:
            raise EtrecordError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH}; no ETRecord is")
        if isinstance(value, dict):
            for key, item in value.items():
                if program:
                    check_program_value(key, item, where)
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str) and _JSON_START.match(value):
            stack.extend((inner, depth + 1) for inner in nested_json(value, where))


def nested_json(text: str, where: str) -> list[Any]:
    """``[json.loads(text)]``, or ``[]`` when it is not JSON (ExecuTorch's own decoding of it would fail too).

    Raises:
        EtrecordError: nested deeper than Python's parser recurses.
    """
    try:
        return [json.loads(text)]
    except RecursionError:
        raise EtrecordError(f"{where}: a JSON string nested deeper than Python parses; no ETRecord is") from None
    except ValueError:
        return []


def load_json(text: str, where: str) -> Any:
    """``json.loads``, its failures one line.

    Raises:
        EtrecordError: not JSON, or nested deeper than Python's parser recurses.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise EtrecordError(f"{where}: JSON nested deeper than Python parses; no ETRecord is") from None
    except ValueError as exc:
        raise EtrecordError(f"{where} is not JSON ({shown(first_line(exc), 120)})") from None


def check_program_value(key: object, value: object, where: str) -> None:
    """Refuse a program field that would reach an evaluator: a symbolic size outside ``sym_exprs``, a name that is
    not an identifier, an attribute path or operator with other characters.

    Raises:
        EtrecordError: naming the member, the field and the value.
    """
    if key == "expr_str":
        reason = sym_exprs.refusal(value)
        if reason is not None:
            raise EtrecordError(f"{where}: symbolic size {shown(value)} is not an expression torch.export writes "
                                f"({reason}); refusing to evaluate it")
    elif key in NAME_KEYS and not (isinstance(value, str) and IDENTIFIER.fullmatch(value)):
        raise EtrecordError(f"{where}: {key} {shown(value)} is not a Python identifier, and torch.fx would paste it "
                            f"into the code it generates; refusing it")
    elif key in PATH_KEYS and not (isinstance(value, str) and ATTRIBUTE_PATH.fullmatch(value)):
        raise EtrecordError(f"{where}: {key} {shown(value)} is not an attribute path of [A-Za-z0-9_.@-], and "
                            f"torch.fx would quote it into the code it generates; refusing it")
    elif key == "as_operator" and not (isinstance(value, str) and OPERATOR.fullmatch(value)):
        raise EtrecordError(f"{where}: as_operator {shown(value)} is not an operator of torch.ops or ExecuTorch's "
                            f"dialects; refusing it")


def label(name: str, limit: int = 80) -> str:
    """A member or method name for a message: ``repr`` (control characters escaped) of at most ``limit`` characters.

    Example::

        >>> print(label("exported_program"), label("a" * 100, limit=4), label("\\x1b[2J\\n"))
        'exported_program' 'aaaa'… '\\x1b[2J\\n'
    """
    return repr(name[:limit]) + ("…" if len(name) > limit else "")


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def parse_checked(data: bytes, path: Path) -> Any:
    """``parse_etrecord`` of the checked bytes, torch.load weights-only and sympify behind the grammar.

    Raises:
        EtrecordError: ExecuTorch could not parse it, or the proxy refused an expression.
    """
    from executorch.devtools.etrecord import parse_etrecord

    try:
        with weights_only(), quiet_libraries(), checked_sympify(path):
            return parse_etrecord(io.BytesIO(data))  # type: ignore[arg-type]  # ZipFile takes a file object
    except EtrecordError:
        raise
    except Exception as exc:  # zip, flatbuffer, json and unpickling errors all mean the same to the user
        raise EtrecordError(f"--etrecord {path}: not a readable ETRecord ({type(exc).__name__}: "
                            f"{shown(first_line(exc), 200)})") from None


def _index(value: object, what: str) -> int:
    """A non-negative index as the delegate map writes it (an int or its decimal string).

    Raises:
        EtrecordError: anything else (``what`` names the file and the field).
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 9:
        return int(value)
    raise EtrecordError(f"{what}: {shown(value)} is not an index")


def _delegate_handles(etrecord: Any, program: Program, path: Path) -> dict[str, dict[int, list[int]]]:
    """``"<method>/<delegate index>"`` → ``node_id`` → handles from the ETRecord's delegate map, checked against
    the program's delegate calls."""
    where = f"--etrecord {path}: delegate_map"
    delegate_map = etrecord._delegate_map or {}
    if not isinstance(delegate_map, dict):
        raise EtrecordError(f"{where} is {shown(delegate_map)}, not an object of methods")
    out: dict[str, dict[int, list[int]]] = {}
    for method, table in delegate_map.items():
        plan = program.methods.get(method)
        if plan is None:
            raise EtrecordError(f"--etrecord {path}: maps method {shown(method)}, which {program.name} does not have")
        if not isinstance(table, dict):
            raise EtrecordError(f"{where}[{label(method)}] is {shown(table)}, not an object of instructions")
        for instruction, entry in table.items():
            index = _index(instruction, f"{where}[{label(method)}]")
            ins = plan.instructions[index] if index < len(plan.instructions) else None
            if ins is None or ins.kind != "delegate":
                raise EtrecordError(f"--etrecord {path} does not match {program.name}: instruction {index} of "
                                    f"{method!r} is not a delegate call there")
            entry_map = _entry_map(entry, f"{where}[{label(method)}][{index}]")
            delegate = plan.delegates[ins.delegate]
            ops = len(delegate.graph.ops) if delegate.graph is not None else None
            if ops is not None and any(node >= ops for node in entry_map):
                raise EtrecordError(f"--etrecord {path} does not match {program.name}: delegate {ins.delegate} has "
                                    f"{ops} nodes, the ETRecord maps node {max(entry_map)}")
            out[f"{method}/{ins.delegate}"] = entry_map
    return out


def _entry_map(entry: object, where: str) -> dict[int, list[int]]:
    """One delegate's ``delegate_map``: node index → debug handles.

    Raises:
        EtrecordError: a field of the wrong type (``where`` names it).
    """
    if not isinstance(entry, dict):
        raise EtrecordError(f"{where} is {shown(entry)}, not an object")
    table = entry.get("delegate_map") or {}
    if not isinstance(table, dict):
        raise EtrecordError(f"{where}.delegate_map is {shown(table)}, not an object of nodes")
    out: dict[int, list[int]] = {}
    for node, handles in table.items():
        if not isinstance(handles, list):
            raise EtrecordError(f"{where}.delegate_map[{shown(node)}] is {shown(handles)}, not a list")
        out[_index(node, f"{where}.delegate_map")] = [_index(h, f"{where}.delegate_map[{shown(node)}]")
                                                      for h in handles]
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
    options = stage("the compile options of the program's Vulkan delegates", compile_options, program)
    with quiet_libraries():
        edge = stage("to_edge_transform_and_lower[vulkan, from the ETRecord]", to_edge_transform_and_lower, exported,
                     partitioner=[VulkanPartitioner(options)])
        found, _ = delegate_sources(edge.exported_program().graph_module, program, how="etrecord")
    return found
