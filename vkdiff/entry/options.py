"""Options shared by the CLI and the pytest plugin, defined once (pytest-benchmark style)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from vkdiff.datamodel.settings import RunSettings


def parse_regex(text: str) -> str:
    """Validate ``--cases``: a Python regular expression."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"--cases {text!r} is not a valid regular expression: {exc}") from None
    return text


def parse_local_wg(text: str) -> str:
    """Validate ``--local-wg``: XxYxZ, optionally @NODE."""
    from vkdiff.device.runtime.workgroups import parse

    try:
        parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--local-wg: {exc}") from None
    return text


def parse_replays(text: str) -> int:
    """Validate ``--replays``: a positive integer."""
    try:
        return parse_repeat(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"--replays must be a positive integer, got {text!r}") from None


def parse_repeat(text: str) -> int:
    """Validate ``--repeat``: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--repeat must be a positive integer, got {text!r}")
    return value


def parse_tolerance(text: str) -> float:
    """``--atol`` / ``--rtol``: a finite number, 0 or more (a NaN bound would pass everything)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"a tolerance must be a finite number >= 0, got {text!r}")
    return value


def parse_sample(text: str) -> int:
    """``--sample``: a count of cases, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"--sample must be 0 (every case) or a count of cases, got {text!r}")
    return value


def parse_timeout(text: str) -> float:
    """Validate ``--timeout``: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--timeout must be a positive number of seconds, got {text!r}")
    return value


def parse_route(text: str) -> str:
    """``--route``: a profile of ``routes.toml`` (one line naming the known ones otherwise)."""

    from vkdiff.device.runtime.routing import UnknownRouteError, check_route

    try:
        return check_route(text)
    except UnknownRouteError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_limits_profile(text: str) -> str:
    """``--limits-profile``: a profile of ``limits.toml`` (one line naming the known ones otherwise)."""
    from vkdiff.device.transports.limits import UnknownLimitsProfileError, check_limits_profile

    try:
        return check_limits_profile(text)
    except UnknownLimitsProfileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_run_options(addoption: Callable[..., object], prefix: str = "") -> None:
    """Add the options that select cases, devices and the ExecuTorch tree."""
    addoption(f"--{prefix}cases", metavar="PATTERN", type=parse_regex, default=None,
              help="Regular expression over case ids (default: every case)")
    addoption(f"--{prefix}device", metavar="SLUG", action="append", default=[],
              help="Adapter slug or name substring, repeatable (default: every Vulkan adapter; env VKDIFF_DEVICE)")
    addoption("--et-src", metavar="PATH", default=None,
              help="ExecuTorch tree with ET-VK shaders: a checkout, REPO@REV, a .tar.* of one, or 'none' (env "
                   "VKDIFF_ET_SRC; default: the installed executorch's commit, fetched once)")
    addoption(f"--{prefix}repeat", metavar="N", type=parse_repeat, default=1,
              help="Run each case N times and flag bitwise differences as NONDETERMINISTIC")
    addoption(f"--{prefix}timeout", metavar="SECONDS", type=parse_timeout, default=None,
              help="Run device work in a child process per device: a wait on the device longer than this ends the "
                   "case ERROR (hang) and the run goes on with a fresh device (default: in-process, no limit)")
    addoption(f"--{prefix}sample", metavar="N", type=parse_sample, default=None,
              help="Run a seeded sample of each op's cases: every dtype, storage, layout, option, edge flag, rank and "
                   "packed-width residue at least once, and at least N cases (foundation suites run whole; 0: every "
                   "case, the default of vkdiff run; pytest reads the ini's vkdiff_sample)")
    addoption(f"--{prefix}seed", metavar="INT", type=int, default=0,
              help="Session seed mixed into every case's input seed (printed at start)")
    addoption(f"--{prefix}route", metavar="PROFILE", type=parse_route, default="native",
              help="Routing profile for model cases on devices: device properties ET-VK routes on (native, mali, "
                   "adreno, amd-coopmat, no-dot-product; see vkdiff/device/runtime/routes.toml)")
    addoption(f"--{prefix}limits-profile", metavar="NAME", type=parse_limits_profile, default=None,
              help="Create every device with a phone's lower limits (adreno-7xx, mali-g7xx; see "
                   "vkdiff/device/transports/limits.toml): exceeding one ends NOT_SUPPORTED naming it")
    addoption(f"--{prefix}transport", choices=("wgpu", "vulkan"), default=None,
              help="How devices are reached: wgpu (default; naga re-translates every module) or vulkan (raw Vulkan: "
                   "the SPIR-V as glslc built it, spec constants through VkSpecializationInfo; env VKDIFF_TRANSPORT)")
    addoption(f"--{prefix}validate", nargs="?", const="sync", choices=("sync", "gpu"), default=None,
              help="Check each graph's command stream, with the tree's own barriers (vTensorStorage::transition), for "
                   "accesses no barrier orders: FAIL_SYNC names both dispatches and the memory; on raw Vulkan the "
                   "Khronos layer's synchronization validation too, and with 'gpu' its GPU-assisted validation "
                   "(FAIL_OOB for accesses past a descriptor) (env VKDIFF_VALIDATE)")
    addoption(f"--{prefix}device-profile", metavar="PROFILE", type=parse_device_profile, default=None,
              help="The raw transport rewrites every module so the device takes the Vulkan spec's liberties: strict "
                   "takes all (the least accurate conformant device: division as a reciprocal multiply, tanh "
                   "through exp, contraction, mediump at float16, subnormals flushed...); mali and adreno take "
                   "those the vendor is known to, under its --route and --limits-profile (profiles.toml says "
                   "where each fact comes from); or rules joined by + (division+contraction). Needs --transport "
                   "vulkan; the slug gains -PROFILE; env VKDIFF_DEVICE_PROFILE")
    addoption(f"--{prefix}mediump", action="store_true", default=None,
              help="Build half variants as ExecuTorch's EXECUTORCH_VULKAN_USE_MEDIUMP_FOR_FP16 build does (GLSL "
                   "mediump: RelaxedPrecision, which a device may compute in float16; the device profiles' "
                   "relaxed_precision rule does); env VKDIFF_MEDIUMP=1")
    addoption(f"--{prefix}local-wg", metavar="XxYxZ[@NODE]", type=parse_local_wg, default=None,
              help="Local workgroup size every dispatch takes (or only delegate node NODE's) instead of ET-VK's pick "
                   "(env VKDIFF_LOCAL_WG); bisect knob and bisect device sweep it")
    addoption(f"--{prefix}mode", choices=("nodes", "graph"), default="nodes",
              help="Model cases: nodes (each node's outputs read back and judged: the locator) or graph (also each "
                   "delegate whole, as ET-VK records it, --replays times: outputs that differ between replays or "
                   "from the node-by-node run are NONDETERMINISTIC, with where)")
    addoption(f"--{prefix}replays", metavar="N", type=parse_replays, default=50,
              help="Whole-graph replays of --mode graph (default 50)")
    addoption(f"--{prefix}allow-empty", action="store_true", default=False,
              help="Succeed even when, with an adapter and a tree, no kernel case ran (all NOT_RUN/NOT_SUPPORTED)")


def _first_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def output_problem(path: str | os.PathLike, flag: str, *, folder: bool) -> str | None:
    """Why ``path`` cannot be the output that ``flag`` names (a file, or with ``folder`` a folder), else None.

    Checked before any work: a directory where a file is wanted, a file where a folder is
    wanted or in the way of one, or no permission to write.

    Example::

        >>> output_problem("/", "--results", folder=False)
        '--results /: is a directory; name a file such as /results.jsonl'
    """
    path = Path(path)
    if path.exists() and path.is_dir() != folder:
        if folder:
            return f"{flag} {path}: is a file, not a folder"
        return f"{flag} {path}: is a directory; name a file such as {path / 'results.jsonl'}"
    anchor = _first_existing(path if folder else path.parent)
    if not anchor.is_dir():
        return f"{flag} {path}: {anchor} is a file, so no folder can be made under it"
    if not os.access(anchor, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"{flag} {path}: no permission to write there"
    return None


def parse_device_profile(text: str) -> str:
    """``--device-profile``: a profile of ``profiles.toml`` or strict rules joined by ``+``."""
    from vkdiff.device.shaders.spirv import SpirvError
    from vkdiff.device.shaders.device_profiles import rules_of

    try:
        rules_of(text)
    except SpirvError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _device_profile_problem(profile: str) -> str | None:
    try:
        parse_device_profile(profile)
    except argparse.ArgumentTypeError as exc:
        return f"--device-profile (or $VKDIFF_DEVICE_PROFILE): {exc}"
    return None


def add_case_device_options(parser, *, profiles_help: str) -> None:
    """``CASE --device --et-src --route --limits-profile --seed``: one case on one device (bisect, repro)."""
    parser.add_argument("case", metavar="CASE", help="Case id, exactly as 'vkdiff run --list' prints it")
    parser.add_argument("--device", metavar="SLUG", default=None, help="Adapter slug (default: the first)")
    parser.add_argument("--et-src", metavar="PATH", default=None, help="ExecuTorch tree (as for vkdiff run)")
    parser.add_argument("--route", metavar="PROFILE", type=parse_route, default="native",
                        help=f"Routing profile to run under ({profiles_help})")
    parser.add_argument("--limits-profile", metavar="NAME", type=parse_limits_profile, default=None,
                        help=f"Limits profile to run under ({profiles_help})")
    parser.add_argument("--seed", metavar="INT", type=int, default=0, help="Session seed")


SETTINGS = ("seed", "repeat", "route", "limits_profile", "timeout", "transport", "validate", "local_wg",
            "device_profile", "mediump")
"""Options that are run settings under the same name (``replays`` counts only with ``--mode graph``)."""


def run_settings(options: Mapping[str, Any], prefix: str = "") -> RunSettings:
    """The run's settings from its parsed options (``vars(args)``, or pytest's options with ``prefix`` ``vkdiff_``)
    over the environment (``RunSettings.from_environment``): the one place an entry point builds them.

    Raises:
        SettingsError: an environment variable holds no setting (one line).
    """
    given = {name: options.get(prefix + name) for name in SETTINGS}
    given["replays"] = options.get(prefix + "replays") if options.get(prefix + "mode") == "graph" else None
    return with_preset(RunSettings.from_environment(**given))


def with_preset(settings: RunSettings) -> RunSettings:
    """A vendor device profile's routing and limits profiles where the run names none of its own."""
    from vkdiff.device.shaders.device_profiles import profiles

    preset = profiles().get(settings.device_profile)
    if preset is None:
        return settings
    return dataclasses.replace(settings, route=preset.route if settings.route == "native" and preset.route
                               else settings.route, limits_profile=settings.limits_profile or preset.limits)


def route_transport_problem(settings: RunSettings) -> str | None:
    """Why ``--route`` or ``--device-profile`` cannot run on the run's transport (one line, before device work), else
    None: a profile that asks the device itself (``device``) needs raw Vulkan, and so does a device profile, which
    rewrites the modules the transport loads as given."""
    from vkdiff.device.transports.adapters import LOADS_MODULES_AS_GIVEN, REPORTS_DEVICE_FEATURES
    from vkdiff.device.runtime.routing import profiles

    route = settings.route
    if route and profiles().get(route, {}).get("from_device") and not REPORTS_DEVICE_FEATURES[settings.transport]:
        return (f"--route {route} answers ET-VK's queries from the device's own Vulkan features, which wgpu does not "
                f"report: add --transport vulkan")
    if settings.device_profile:
        problem = _device_profile_problem(settings.device_profile)
        if problem:
            return problem
    if settings.device_profile and not LOADS_MODULES_AS_GIVEN[settings.transport]:
        return (f"--device-profile {settings.device_profile} rewrites the SPIR-V a transport loads as given, and "
                f"{settings.transport} re-translates it: add --transport vulkan")
    return None
