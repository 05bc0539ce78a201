"""An ETRecord is data: nothing in one reaches an evaluator, and every refusal is one line (issue 32, item 1).

Each planted payload would ``touch`` a marker file if evaluated; ``test_the_planted_payloads_are_live`` shows
ExecuTorch's own ``parse_etrecord`` running each of them, so the refusals below are refusals of live code.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Callable

import pytest

from vkdiff.lowering import sym_exprs
from vkdiff.lowering.etrecord import EtrecordError, attach_etrecord, member_kind, read_etrecord, shown

pytest_plugins = ["pytester"]

WRITTEN = ("s27", "16*s27", "8*s27", "s77 - u0", "u0 < s77", "u0 >= 0", "u0 <= 6", "Min(s17, s77)", "Max(1, s77 - 2)",
           "16*s83**2", "4*s83 - (Mod(4*s83, 3))", "2*((s77//2))", "((u0//2)) + 1", "18 - s77",
           "s17 + s77 - (((s77 - 1)//4))", "3*Max(1, (((s0 - 3)//2)) + 1)*Max(1, (((s53 - 3)//2)) + 1)",
           "Max(1, TruncToInt(0.5*ToFloat(s27)))*Max(1, TruncToInt(0.5*ToFloat(s77)))", "TruncToInt(1.5*ToFloat(s0))",
           "(s0 > 1) & (s1 < 5)", "Eq(s0, 1) | Ne(s1, 2)", "Piecewise((s0, s0 > 2), (1, True))", "True",
           "CeilToInt(IntTrueDiv(s0, 3))", "PythonMod(s0, 7) + CleanDiv(s1, 2) - FloorDiv(u3, 4)", "Abs(u0)",
           "And(Ge(s0, 2), Lt(s0, 9))", "s0/2", "1.00000000000000e-5*s0", "(s0 + 1)**2", "-s0", "zuf0")
"""``str()`` of sizes torch.export wrote for vkdiff's survey programs (view/reshape arithmetic, slicing, cat, floor
division, interpolate, unbacked sizes and their checks), and of torch's symbolic functions."""

REFUSED = ("__import__('os').system('id') or 16*s27", "s27.__class__", "exec1(s27)", "eval", "getattr(s27, 'x')",
           "s27 if 1 else 2", "lambda: 1", "[s27]", "'s27'", "s27\n", "ｓ27", "s٣", "Max", "Mod(s27, 3",
           "(" * 40 + "s27" + ")" * 40, "1" * 41, "", "2s27", "Symbol('x')", "9**99", "(s0**2)**2", "s0**100",
           "s0**2**3", "s0**-1", "s0 and s1", "s0; s1", "s0 = 1", "None", "pi", "oo", "S27", "x" * 5000, 3, None,
           {"s27": 1}, ["16*s27"])
"""Code, attribute access, strings, calls of unknown names, towers of powers, unbounded text, and non-strings."""


def live(marker: Path) -> str:
    """A Python expression that touches ``marker`` and is otherwise a size."""
    return f"__import__('os').system('touch {marker}') or 16*s27"


def rewrite(src: Path, dst: Path, edit: Callable[[str, bytes], bytes | None]) -> Path:
    """A copy of the zip ``src`` with each member's bytes passed through ``edit`` (None drops the member)."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        for info in old.infolist():
            data = edit(info.filename, old.read(info))
            if data is not None:
                new.writestr(info.filename, data)
    return dst


def edit_program(src: Path, dst: Path, change: Callable[[dict], None], member: str = "exported_program") -> Path:
    """A copy of ``src`` whose program ``member`` went through ``change`` (in place, on the parsed JSON)."""
    def edit(name: str, data: bytes) -> bytes:
        if name != member:
            return data
        document = json.loads(data)
        change(document)
        return json.dumps(document).encode()
    return rewrite(src, dst, edit)


def replace_everywhere(old: str, new: Any) -> Callable[[dict], None]:
    """A ``change`` that replaces every string value (and key) equal to ``old``."""
    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            return {(new if k == old else k): swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return new if value == old else value

    def change(document: dict) -> None:
        swapped = swap(document)
        document.clear()
        document.update(swapped)
    return change


def plant_size(marker: Path) -> Callable[[dict], None]:
    """Every stride ``16*s27`` becomes a size that touches ``marker``."""
    return replace_everywhere("16*s27", live(marker))


def plant_symbool(marker: Path) -> Callable[[dict], None]:
    """A SymBool value ``deserialize_graph`` evaluates whatever uses it."""
    def change(document: dict) -> None:
        document["graph_module"]["graph"]["sym_bool_values"]["ok"] = {"as_expr": {"expr_str": live(marker) + " > 1"}}
    return change


def plant_placeholder(marker: Path) -> Callable[[dict], None]:
    """The input ``x`` renamed to a default argument: ``torch.fx`` writes ``def forward(self, ..., x=<code>)``."""
    return replace_everywhere("x", f"x=__import__('os').system('touch {marker}')")


def plant_fake_tensor(marker: Path, src: Path, dst: Path) -> Path:
    """A state dict whose weight is a fake tensor rebuilt from JSON (``_reconstruct_fake_tensor``, which
    ExecuTorch allows ``torch.load``): its size is code."""
    import torch
    from executorch.exir.serde.export_serialize import _reconstruct_fake_tensor

    meta = {"dtype": 7, "sizes": [{"as_expr": {"expr_str": live(marker), "hint": {"as_int": 8}}}, {"as_int": 16}],
            "requires_grad": True, "device": {"type": "cpu"}, "strides": [{"as_int": 16}, {"as_int": 1}],
            "storage_offset": {"as_int": 0}, "layout": 7}

    class Fake:
        def __reduce__(self):
            return _reconstruct_fake_tensor, (json.dumps(meta).encode(), True)

    buffer = io.BytesIO()
    torch.save({"l.weight": Fake()}, buffer)
    return rewrite(src, dst, lambda name, data: buffer.getvalue() if name == "exported_program_state_dict" else data)


PLANTS = ("size", "symbool", "placeholder", "fake_tensor")


def planted(kind: str, etrecord: Path, folder: Path) -> tuple[Path, Path]:
    """(the ETRecord with payload ``kind`` planted, the marker it would write)."""
    marker = folder / f"PWNED-{kind}"
    dst = folder / f"{kind}.etrecord"
    if kind == "fake_tensor":
        return plant_fake_tensor(marker, etrecord, dst), marker
    change = {"size": plant_size, "symbool": plant_symbool, "placeholder": plant_placeholder}[kind](marker)
    return edit_program(etrecord, dst, change), marker


def refused(path: Path) -> str:
    """``read_etrecord``'s one-line refusal of ``path``."""
    with pytest.raises(EtrecordError) as caught:
        read_etrecord(path)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message, message
    assert message.startswith(f"--etrecord {path}"), message
    return message


@pytest.mark.parametrize("text", WRITTEN)
def test_the_grammar_admits_what_torch_export_writes(text):
    assert sym_exprs.refusal(text) is None


@pytest.mark.parametrize("text", REFUSED, ids=lambda t: repr(t)[:30])
def test_the_grammar_refuses_code_and_unbounded_text(text):
    assert sym_exprs.refusal(text)


def test_admitted_text_sympifies_in_bounded_time():
    """Random token soup the grammar admits evaluates to sympy values, quickly (no tower of powers, no huge
    literal), and never touches anything else."""
    import random
    import time

    import sympy

    seed = 32
    print(f"seed {seed}")
    rng = random.Random(seed)
    alphabet = ["s0", "u1", "3", "99", "0.5", "+", "-", "*", "//", "%", "**", "2", "(", ")", ",", "Max(", "Mod(",
                "FloorDiv(", "<", "&", "~", "True", " "]
    admitted = 0
    start = time.perf_counter()
    while admitted < 300:
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14)))
        if sym_exprs.refusal(text) is not None:
            continue
        admitted += 1
        try:
            sympy.sympify(text)
        except (TypeError, ValueError, ZeroDivisionError, sympy.SympifyError):
            pass
    assert time.perf_counter() - start < 20


def test_member_kinds_mirror_executorch():
    from executorch.devtools.etrecord._etrecord import ETRecordReservedFileNames as Names

    assert member_kind(Names.EXPORTED_PROGRAM) == member_kind(Names.EDGE_DIALECT_EXPORTED_PROGRAM) == "program"
    assert member_kind(f"{Names.EDGE_DIALECT_EXPORTED_PROGRAM}/forward") == "program"
    assert member_kind(Names.ET_DIALECT_GRAPH_MODULE) == "program", "parse_etrecord's catch-all deserializes it"
    for name in (Names.DEBUG_HANDLE_MAP_NAME, Names.DELEGATE_MAP_NAME, Names.INSTRUCTION_ID_TO_NUM_OUTS_MAP_NAME,
                 Names.EXPORT_GRAPH_ID):
        assert member_kind(name) == "json"
    for name in (Names.ETRECORD_IDENTIFIER, Names.REFERENCE_OUTPUTS, Names.REPRESENTATIVE_INPUTS,
                 "exported_program_state_dict", f"{Names.EDGE_DIALECT_EXPORTED_PROGRAM}/forward_example_inputs"):
        assert member_kind(name) == "opaque"


def test_the_real_etrecord_attaches_with_sources(dynamic_program):
    """The grammar and the name rules admit what torch.export and ExecuTorch write: the ETRecord of a program with a
    dynamic size parses, and re-lowering it reproduces the delegate, so every node has a source."""
    from vkdiff.program.pte import load_pte

    pte, etrecord = dynamic_program
    program = load_pte(pte.read_bytes(), pte.name)
    assert attach_etrecord(program, etrecord) == []
    [delegate] = [d for m in program.methods.values() for d in m.delegates if d.vulkan]
    assert delegate.sources and delegate.debug_handles


@pytest.mark.parametrize("kind", PLANTS)
def test_the_planted_payloads_are_live(kind, dynamic_program, tmp_path):
    """Control: ExecuTorch's own ``parse_etrecord`` runs each planted payload (so the refusals below matter)."""
    from executorch.devtools.etrecord import parse_etrecord

    from vkdiff.capture import quiet_libraries

    path, marker = planted(kind, dynamic_program[1], tmp_path)
    with quiet_libraries():
        parse_etrecord(str(path))
    assert marker.exists()


@pytest.mark.parametrize("kind", PLANTS)
def test_read_etrecord_refuses_every_planted_payload(kind, dynamic_program, tmp_path):
    from executorch.exir.serde import export_serialize

    real = export_serialize.sympy
    path, marker = planted(kind, dynamic_program[1], tmp_path)
    message = refused(path)
    assert not marker.exists()
    assert export_serialize.sympy is real, "the sympify proxy is removed after a refusal"
    if kind == "fake_tensor":
        assert "symbolic size \"__import__('os').system" in message and "ExecuTorch met it while parsing" in message
    else:
        assert "member 'exported_program'" in message


def test_a_size_refusal_names_the_file_member_and_expression(dynamic_program, tmp_path):
    path, marker = planted("size", dynamic_program[1], tmp_path)
    quoted = shown(live(marker))
    assert quoted.startswith("\"__import__('os').system('touch ") and quoted.endswith("…\"") and len(quoted) == 63
    assert refused(path) == (f"--etrecord {path}: member 'exported_program': symbolic size {quoted} is not an "
                             f"expression torch.export writes ('__import__' is neither a size symbol nor a function "
                             f"torch.export writes); refusing to evaluate it")


@pytest.mark.parametrize(("what", "change", "expected"), [
    ("a dict expr_str (sympify would evaluate its keys)", replace_everywhere("16*s27", {live(Path("/x")): 1}),
     "symbolic size \"{\"__import__("),
    ("control characters", replace_everywhere("16*s27", "16*s27\n\x1b[2J"), r'symbolic size "16*s27\n\x1b[2J"'),
    ("a parameter path quoted into getattr(self, \"...\")", replace_everywhere("l.weight", 'l.w") or print(1) or ("'),
     'parameter_name "l.w") or print(1)'),
    ("an operator that is no op", lambda d: d["graph_module"]["graph"]["nodes"][0]["inputs"].append(
        {"name": "f", "arg": {"as_operator": "torch.os.system"}}), "as_operator \"torch.os.system\""),
    ("a higher-order kwarg pasted into a call", lambda d: d["graph_module"]["graph"]["nodes"][0]["inputs"].append(
        {"name": "x=print(1), y", "arg": {"as_int": 1}}), "name \"x=print(1), y\" is not a Python identifier"),
    ("a size inside a JSON string", lambda d: d["graph_module"]["graph"]["nodes"][0]["metadata"].update(
        from_node=json.dumps([{"expr_str": "__import__('os')"}])), "symbolic size \"__import__('os')\""),
])
def test_read_etrecord_refuses_other_fields_that_reach_code(what, change, expected, dynamic_program, tmp_path):
    message = refused(edit_program(dynamic_program[1], tmp_path / "e.etrecord", change))
    assert expected in message, (what, message)


def test_a_size_inside_a_lowered_modules_json_string_is_refused(lowered_etrecord, tmp_path):
    """ExecuTorch decodes a delegate call's lowered module from a JSON string and deserializes its original
    module: the walk reaches sizes there too. Control: ``parse_etrecord`` runs the payload."""
    from executorch.devtools.etrecord import parse_etrecord

    from vkdiff.capture import quiet_libraries

    marker = tmp_path / "PWNED-nested"

    def plant(document: dict) -> None:
        for node in document["graph_module"]["graph"]["nodes"]:
            for argument in node["inputs"]:
                text = argument["arg"].get("as_string", "")
                if text.startswith('{"backend_id"'):
                    argument["arg"]["as_string"] = text.replace('"16*s27"', json.dumps(live(marker)))

    path = edit_program(lowered_etrecord, tmp_path / "nested.etrecord", plant,
                        member="edge_dialect_exported_program/forward")
    assert "member 'edge_dialect_exported_program/forward': symbolic size \"__import__" in refused(path)
    assert not marker.exists()
    with quiet_libraries():
        parse_etrecord(str(path))
    assert marker.exists()


def test_an_etrecord_with_lowered_modules_parses(lowered_etrecord):
    record = read_etrecord(lowered_etrecord)
    assert sum(n.target.__name__ == "executorch_call_delegate" for n in record.edge_dialect_program.graph.nodes
               if n.op == "call_function") >= 1


def test_a_json_bomb_is_one_line(dynamic_program, tmp_path):
    """200,000 levels deep: Python's parser would raise RecursionError; the walk also bounds what it admits."""
    bomb = b"[" * 200_000 + b"]" * 200_000
    for member in ("exported_program", "delegate_map"):
        path = rewrite(dynamic_program[1], tmp_path / f"{member}.etrecord",
                       lambda name, data, member=member: bomb if name == member else data)
        assert "JSON nested deeper than Python parses" in refused(path)
    deep = b"[" * 300 + b"]" * 300
    path = rewrite(dynamic_program[1], tmp_path / "deep.etrecord",
                   lambda name, data: deep if name == "exported_program" else data)
    assert "JSON nested deeper than 200" in refused(path)
    nested = json.dumps({"graph_module": {"metadata": {"from_node": "[" * 200_000}}}).encode()
    path = rewrite(dynamic_program[1], tmp_path / "nested.etrecord",
                   lambda name, data: nested if name == "exported_program" else data)
    assert "a JSON string nested deeper than Python parses" in refused(path)


def test_declared_sizes_over_the_budget_are_refused_before_any_member_is_read(dynamic_program, tmp_path, monkeypatch):
    """A 16 MB member of zeros deflates to kilobytes; with a 1 MB budget the zip is refused from its directory."""
    path = tmp_path / "bomb.etrecord"
    with zipfile.ZipFile(dynamic_program[1]) as old, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            new.writestr(info.filename, old.read(info))
        new.writestr("exported_program_padding", bytes(16 << 20))
    assert path.stat().st_size < 1 << 20
    monkeypatch.setenv("VKDIFF_MEMORY_BUDGET", "1M")

    def never(*args, **kwargs):
        raise AssertionError("a member was read before the budget check")

    monkeypatch.setattr(zipfile.ZipFile, "open", never)
    message = refused(path)
    assert re.search(r"its 14 members uncompressed\): needs 16\.\d MB of host memory, over vkdiff's budget of 1\.0 MB",
                     message), message


def test_only_a_regular_file_is_read(tmp_path):
    fifo = tmp_path / "fifo.etrecord"
    os.mkfifo(fifo)
    assert "not a regular file" in refused(fifo)
    assert "not a regular file" in refused(tmp_path)
    assert "No such file or directory" in refused(tmp_path / "absent.etrecord")


def test_the_cli_refuses_in_one_line_and_runs_nothing(dynamic_program, tmp_path):
    pte = dynamic_program[0]
    path, marker = planted("size", dynamic_program[1], tmp_path)
    done = subprocess.run([sys.executable, "-c", "import sys; from vkdiff.entry.cli import main; sys.exit(main())",
                           "check", str(pte), "--etrecord", str(path), "--et-src", "none"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vkdiff: error: --etrecord {path}: member 'exported_program'"), \
        done.stderr
    assert "refusing to evaluate it" in lines[0]
    assert not marker.exists()


def test_the_python_api_refuses_in_one_line_and_runs_nothing(dynamic_program, tmp_path):
    import vkdiff
    from vkdiff.subjects.programs import SubjectError

    path, marker = planted("size", dynamic_program[1], tmp_path)
    with pytest.raises(SubjectError) as caught:
        vkdiff.check(dynamic_program[0], etrecord=path, et_src="none", results=tmp_path / "r.jsonl")
    assert "\n" not in str(caught.value) and "refusing to evaluate it" in str(caught.value)
    assert not marker.exists() and not (tmp_path / "r.jsonl").exists()


def test_the_plugin_refuses_in_one_line_and_runs_nothing(dynamic_program, pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("VKDIFF_ET_SRC", "none")
    path, marker = planted("size", dynamic_program[1], tmp_path)
    pytester.makeconftest(f"""
import vkdiff

def pytest_vkdiff_cases(config):
    return vkdiff.program_cases({str(dynamic_program[0])!r}, etrecord={str(path)!r})
""")
    result = pytester.runpytest_subprocess("--vkdiff", "--vkdiff-suite", "user")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1 and re.fullmatch(rf"ERROR: pytest_vkdiff_cases: --etrecord {re.escape(str(path))}: "
                                             r"member 'exported_program': symbolic size .* refusing to evaluate it",
                                             errors[0]), result.stderr.lines
    assert [line for line in result.stderr.lines + result.stdout.lines if "etrecord" in line] == errors
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not marker.exists()
