"""``vkdiff check``: a user's program, module or LLM config, node by node on every Vulkan device."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path
from typing import Any, Sequence

from vkdiff.entry.options import parse_limits_profile, parse_repeat, parse_route, parse_timeout, parse_tolerance


def add_parser(sub) -> None:
    check = sub.add_parser(
        "check", help="Check a .pte, a module factory or an LLM config node by node on every Vulkan device",
        description="SUBJECT is a program (model.pte), a module factory (model.py:make, with --recipe), or an "
                    "artifacts folder; or give --llama params.json.")
    check.add_argument("subject", metavar="SUBJECT", nargs="?", default=None,
                       help="model.pte, path/to/file.py:factory, or a --save-artifacts folder")
    check.add_argument("--recipe", metavar="R", default=None, help="Quantization recipe of a module (fp32, 4w, 8da4w, "
                       "8da4w-fp32zp, emb4w, pt2e-..., as the catalogue names them)")
    check.add_argument("--partitioner", metavar="P", default="vulkan", help="Partitioner of a module (default vulkan)")
    check.add_argument("--llama", metavar="PARAMS.json", default=None,
                       help="An LLM config: export it with export_llama and check it as a generation")
    check.add_argument("--checkpoint", metavar="FILE", default=None, help="Checkpoint of --llama (default: weights "
                       "generated from a seed)")
    check.add_argument("--qmode", choices=("4w", "8da4w"), default="8da4w", help="--llama quantization mode")
    check.add_argument("--group-size", type=int, default=32, help="--llama weight group size")
    check.add_argument("--embedding-quantize", metavar="BITS,GROUP", default=None, help="--llama -E, e.g. 4,32")
    check.add_argument("--prompt-len", type=int, default=7, help="--llama prefill length")
    check.add_argument("--decode-steps", type=int, default=3, help="--llama greedy decode steps after the prefill")
    check.add_argument("--inputs", metavar="FILE.npz|.pt", action="append", default=[],
                       help="Inputs of one call, repeatable (one file per call, in order); or one .npz of every call "
                            "keyed CALL/INPUT (call0/x, call1/x, ...)")
    check.add_argument("--method", metavar="NAME", default=None, help="Method to check (default: every method "
                       "with a Vulkan delegate)")
    check.add_argument("--etrecord", metavar="FILE", default=None, help="ETRecord of the program: names each node's "
                       "module path and source line")
    check.add_argument("--shapes", metavar="SIZES", action="append", default=[],
                       help="Extra call at sizes below the bound, each tensor input's sizes as 1x3x16, inputs "
                            "separated by commas (repeatable)")
    check.add_argument("--int-range", metavar="LO:HI", default=None, help="Range of generated integer inputs")
    check.add_argument("--atol", type=parse_tolerance, default=None, help="Absolute tolerance of the method output")
    check.add_argument("--rtol", type=parse_tolerance, default=None, help="Relative tolerance of the method output")
    check.add_argument("--device", metavar="SLUG", action="append", default=[],
                       help="Adapter slug or name substring, repeatable (default: every Vulkan adapter)")
    check.add_argument("--et-src", metavar="PATH", default=None, help="ExecuTorch tree (as for vkdiff run)")
    check.add_argument("--route", metavar="PROFILE", type=parse_route, default="native", help="Routing profile")
    check.add_argument("--limits-profile", metavar="NAME", type=parse_limits_profile, default=None,
                       help="Mobile limits profile")
    check.add_argument("--repeat", metavar="N", type=parse_repeat, default=1, help="Run N times, compare bitwise")
    check.add_argument("--timeout", metavar="SECONDS", type=parse_timeout, default=None,
                       help="Device work in a child per device, a hang ends ERROR after this long")
    check.add_argument("--seed", metavar="INT", type=int, default=0, help="Seed of generated inputs")
    check.add_argument("-r", "--report", metavar="DIR", default=None, help="Write HTML reports to DIR")
    check.add_argument("--results", metavar="FILE.jsonl", default=None,
                       help="Results file (default: vkdiff-results/check-<time>.jsonl)")
    check.add_argument("--save-artifacts", metavar="DIR", default=None,
                       help="Also write the prepared program, its calls and expected outputs, and the SPIR-V every "
                            "routing profile asks for, for runners without torch, executorch or glslc "
                            "(vkdiff check DIR there)")
    check.add_argument("--allow-empty", action="store_true", help="Exit 0 even when no delegate ran")
    check.add_argument("-v", "--verbose", action="store_true", help="Show what the libraries print")


def _options(args: argparse.Namespace):
    from vkdiff.subjects import inputs as program_inputs
    from vkdiff.subjects.programs import CheckOptions, SubjectError

    try:
        shapes = [program_inputs.parse_shapes(s) for s in args.shapes]
        int_range = program_inputs.parse_int_range(args.int_range) if args.int_range else None
    except program_inputs.InputError as exc:
        raise SubjectError(str(exc)) from None
    given = [("--inputs", p) for p in args.inputs] + [("--etrecord", args.etrecord), ("--checkpoint", args.checkpoint)]
    for flag, path in given:
        if path is not None and not Path(path).is_file():
            raise SubjectError(f"{flag} {path}: no such file")
    return CheckOptions(method=args.method, inputs=tuple(Path(p) for p in args.inputs), shapes=shapes,
                        int_range=int_range, seed=args.seed, atol=args.atol, rtol=args.rtol,
                        etrecord=Path(args.etrecord) if args.etrecord else None)


def _subject_cases(args: argparse.Namespace, argv: Sequence[str]) -> tuple[list, Any]:
    """(program cases for devices, the module case whose host checks also run, or None) of the command's subject.

    Raises:
        SubjectError: one line on what is wrong with the subject or its options.
    """
    from vkdiff.datamodel import Tolerance
    from vkdiff.subjects.programs import SubjectError, check_command, pte_cases

    options, command = _options(args), check_command(argv)
    subject = args.subject
    if args.llama is not None:
        from vkdiff.subjects.llama import llama_case

        case = llama_case(Path(args.llama), checkpoint=Path(args.checkpoint) if args.checkpoint else None,
                          qmode=args.qmode, group_size=args.group_size, embedding_quantize=args.embedding_quantize,
                          prompt_len=args.prompt_len, decode_steps=args.decode_steps)
        return _module(case, options, command)
    if subject is None:
        raise SubjectError("give a SUBJECT (model.pte, file.py:factory, an artifacts folder) or --llama params.json")
    path = Path(subject)
    if path.is_dir():
        from vkdiff.subjects.artifacts import ArtifactError, load

        try:
            return load(path, atol=args.atol, rtol=args.rtol), None
        except ArtifactError as exc:
            raise SubjectError(str(exc)) from None
    if ":" in subject and subject.rsplit(":", 1)[0].endswith(".py"):
        from vkdiff.subjects.programs import module_case

        if args.recipe is None:
            raise SubjectError(f"{subject}: a module needs --recipe (fp32, 4w, 8da4w, ...)")
        tolerance = (Tolerance(atol=args.atol or 0.0, rtol=args.rtol or 0.0)
                     if args.atol is not None or args.rtol is not None else None)
        return _module(module_case(subject, args.recipe, args.partitioner, tolerance=tolerance), options, command)
    if args.recipe is not None:
        raise SubjectError(f"--recipe {args.recipe}: {subject} is a program; recipes apply to module factories")
    _tree_schemas(args.et_src)
    return pte_cases(path, options, command), None


def _tree_schemas(et_src: str | None) -> None:
    """The chosen tree's flatbuffer schemas read the program (a runner has no executorch to lend its own)."""
    from vkdiff.device.shaders.trees import EtSourceError, choose_tree
    from vkdiff.subjects.programs import SubjectError, read_schemas_from

    try:
        tree = choose_tree(et_src)
    except EtSourceError as exc:
        raise SubjectError(str(exc)) from None
    if tree.path is not None:
        read_schemas_from(tree.path)


def _module(case, options, command) -> tuple[list, Any]:
    from vkdiff.subjects.programs import module_cases

    cases, _ = module_cases(case, options, command)
    return cases, case


def run(args: argparse.Namespace) -> int:
    """``args.argv``: the words after ``check``, from which each case's repro command is made."""
    from vkdiff.entry.terminal import (Interrupts, UsageError, check_outputs, explain_no_tree, print_summary,
                                       report_line, resolve_inputs, run_exit_code, summarize, write_report)
    from vkdiff.entry.terminal import console as terminal_console
    from vkdiff.harness.loop import run_cases
    from vkdiff.subjects.programs import SubjectError
    from vkdiff.harness.runner import Runner
    from vkdiff.reports import inspector
    from vkdiff.store import ResultStore

    console = terminal_console(stderr=True, soft_wrap=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    results_path = Path(args.results or f"vkdiff-results/check-{stamp}.jsonl")
    check_outputs((results_path, "--results", False), (args.report, "--report", True),
                  (args.save_artifacts, "--save-artifacts", True))
    try:
        cases, module = _quiet(args.verbose, _subject_cases, args, args.argv)
    except SubjectError as exc:
        raise UsageError(str(exc)) from None
    tree, devices, _ = resolve_inputs(args, console)
    for note in [n for case in cases for n in getattr(case, "notes", [])]:
        console.print(f"note: {note}", markup=False, style="yellow")
    if args.save_artifacts:
        _save_artifacts(Path(args.save_artifacts), cases, module, args, tree, console)
    runner = Runner(tree=tree, adapters=devices, settings=args.settings, et_src=args.et_src)
    host = [] if module is None else _host_results(module, runner, cases, args.verbose)
    def shown(result) -> None:
        report_line(result, console)
        _first_bad_line(result, console)

    with Interrupts(console) as interrupts:
        results = run_cases(cases, host, runner, ResultStore(results_path), on_result=shown,
                            stop=lambda: bool(interrupts.received), wrap=lambda fn, *a: _quiet(args.verbose, fn, *a))
    print_summary(summarize(results), console)
    explain_no_tree(results, tree, console)
    console.print(f"results: {results_path}", markup=False)
    for written in inspector.write(results, results_path.parent / f"{results_path.stem}.nodes"):
        console.print(f"node table: {written}", markup=False)
    if args.report:
        write_report([results_path], Path(args.report), console)
    return run_exit_code(results, runner, interrupts, args.allow_empty, console)


def _save_artifacts(folder: Path, cases: Sequence, module, args: argparse.Namespace, tree, console) -> None:
    """Write every prepared case and the SPIR-V of every routing profile's dispatches (swept on this machine)."""
    from vkdiff.entry.terminal import print_sweeps
    from vkdiff.subjects import artifacts

    prepared = [case for case in cases if not isinstance(case.model, tuple)]
    if not prepared:
        console.print(f"--save-artifacts {folder}: nothing to save (the subject could not be prepared)",
                      markup=False, style="yellow")
        return
    if module is not None:
        from vkdiff.lowering.lower import lower

        pte = lower(module).pte
    else:
        pte = Path(args.subject).read_bytes()
    for case in prepared:
        artifacts.write(folder, case.ident, case.model, pte)
    print_sweeps(folder, prepared, tree, args.settings, console)


def _host_results(module, runner, cases, verbose: bool) -> list:
    """A module's host verdicts (lowering, fusion rules, CPU runtime); only a lowered subject has them."""
    from vkdiff.harness.models import check_case

    return _quiet(verbose, check_case, module, runner.shader_variants(),
                  repro=" ".join(cases[0].command) if cases else "")


def _quiet(verbose: bool, fn, *args, **kwargs):
    """Run ``fn`` with the libraries' chatter captured, unless ``-v``."""
    if verbose:
        return fn(*args, **kwargs)
    from vkdiff.capture import quiet_libraries

    with quiet_libraries():
        return fn(*args, **kwargs)


def _first_bad_line(result, console) -> None:
    """The first diverging node of a failing device result, where it comes from."""
    node = result.node or {}
    if node.get("source") and result.verdict.is_failure():
        console.print(f"  first bad node: delegate {node.get('delegate', 0)} node {node.get('index')} "
                      f"{node.get('op', '')} ({node['source']})", markup=False, style="red")
