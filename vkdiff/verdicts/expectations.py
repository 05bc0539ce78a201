"""Known upstream bugs as expectations: matched to results, shown as known, fixed ones as unexpected passes."""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from vkdiff.datamodel import Result, Status
from vkdiff.device.runtime.trait_probes import TRAITS

DATA = Path(__file__).parents[1] / "cases" / "expectations.yaml"


@dataclasses.dataclass(kw_only=True, frozen=True)
class Expectation:
    """One known bug and the results it explains."""

    id: str
    case: str = ""
    """Regex over case ids. Empty: a finding matched inside any program (catalogue or a user's), by ``node_op``."""
    node_op: str = ""
    """Regex over the op of a program result's first diverging node (``result.node["op"]``)."""
    node_args: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Per non-tensor argument of that node (by schema name), a regex its value as text must contain
    (``approximate: '^none$'``, ``padding: '[1-9]'``)."""
    minimal: str = ""
    """The finding's minimal shape, named on a program's result it explains."""
    rule: tuple[str, ...] = ()
    """Rules of a model case the bug shows in (empty: any, and every kernel case)."""
    traits: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Probed device traits the bug needs (``device_info["traits"]``, names of
    ``vkdiff.device.runtime.trait_probes.TRAITS``), all of them: trait → the value, a list of values (any of them), or
    for a table trait (``f2i_out_of_range``) a mapping of its entries, each a value or a list. Empty: any device. A
    result that recorded no traits, or not this one (not measured, probe error), is never in the territory of a
    trait-keyed expectation: what a device does is read from its probes, never guessed from its name."""
    vendor: str = ""
    """Regex (case-insensitive search) over the vendor as results record it: the transport's vendor name and the PCI
    vendor id in hex (``NVIDIA 0x10de``, ``nvidia 0x10de``, ``mesa 0x10005``). Only where the cause is the vendor's
    own compiler or driver and no probed trait states it (the reason says why); never a product's name. Empty: any."""
    driver: str = ""
    """Regex (case-insensitive search) over ``device_info["driver"]``, where a driver (version) is truly the cause and
    no trait states it. Empty: any."""
    transport: tuple[str, ...] = ()
    """Transports the bug shows through (``wgpu``, ``vulkan``; empty: both): a naga translation bug, or one only
    the exact SPIR-V or a real blit reaches."""
    profile: tuple[str, ...] = ()
    """Device profiles (``--device-profile``: ``device_info["profile"]``) the finding shows under, where it needs a
    liberty no probe states for every expression (reassociation of one product); empty: any device. A real device
    that takes the liberty shows it as a failure this expectation does not cover: news."""
    validation: tuple[str, ...] = ()
    """Validation that must be on for the bug to show (``gpu``: only the layer's GPU-assisted validation sees it,
    an access robustBufferAccess hides); empty: any run."""
    status: tuple[str, ...] = ()
    """Statuses the bug produces."""
    signature: str = ""
    """Regex that the result's reason must contain."""
    shader: str = ""
    """Regex the result's shader must match (a kernel's variant, a model's failing node's shader); empty: any."""
    node: int | None = None
    """Index of the first diverging node of a model result; None: any."""
    max_abs: float | None = None
    """The largest error the bug makes (``error_of``): a larger one is a different failure."""
    mismatches: int | None = None
    """The most elements over tolerance (or unwritten) the bug leaves (where the result counts them)."""
    racy: bool = False
    """A data race: the bug shows on some runs and devices only, so a PASS is ``racy-pass``, not an unexpected
    pass (``--repeat`` is the way to see it flip)."""
    link: str = ""
    reason: str = ""

    def applies_to(self, result: Result) -> bool:
        """Same case and rule, on a device with the traits, vendor and driver named: the bug's territory, whatever the
        outcome."""
        info = result.device_info or {}
        return (self._where(result)
                and (not self.rule or result.rule in self.rule)
                and (not self.traits or has_traits(info.get("traits"), self.traits))
                and (not self.vendor or re.search(self.vendor, vendor_of(info), re.IGNORECASE) is not None)
                and (not self.driver
                     or re.search(self.driver, str(info.get("driver") or ""), re.IGNORECASE) is not None)
                and (not self.transport or transport_of(result) in self.transport)
                and (not self.profile or str(info.get("profile") or "") in self.profile)
                and (not self.validation or validation_of(result) in self.validation))

    @property
    def in_programs(self) -> bool:
        """A finding matched by node inside any program, not by case id."""
        return not self.case

    @functools.cached_property
    def _case(self) -> re.Pattern:
        return re.compile(self.case)

    def _where(self, result: Result) -> bool:
        """The case, or for a finding in programs the first diverging node's op and arguments."""
        if not self.in_programs:
            return self._case.search(result.case) is not None
        node = result.node or {}
        args = node.get("args") or {}
        return (re.search(self.node_op, str(node.get("op") or "")) is not None
                and all(name in args and re.search(want, str(args[name])) is not None
                        for name, want in self.node_args.items()))

    def explains(self, result: Result) -> bool:
        """The bug's territory, one of its statuses and signature, and its shape: the shader or node it shows in,
        no larger an error and no more elements than it makes (so a new failure of the same case is not absorbed)."""
        if not (self.applies_to(result) and result.status in self.status
                and re.search(self.signature, result.reason or "") is not None):
            return False
        if self.shader and re.search(self.shader, result.shader or "") is None:
            return False
        if self.node is not None and (result.node or {}).get("index") != self.node:
            return False
        if result.status in UNMEASURED:
            return True
        error, count = error_of(result)
        return ((self.max_abs is None or (error is not None and error <= self.max_abs))
                and (self.mismatches is None or count is None or count <= self.mismatches))


UNMEASURED = frozenset({Status.FAIL_OOB.name, Status.FAIL_SYNC.name})
"""Statuses whose result holds no error size: the signature alone pins them (which tensor, which bytes)."""


def has_traits(recorded: Any, wanted: Mapping[str, Any]) -> bool:
    """Whether ``recorded`` (a result's ``device_info["traits"]``) holds every trait of ``wanted`` at one of its values;
    False when no traits were recorded (results from before traits were probed, host results): never a guess."""
    if not isinstance(recorded, Mapping):
        return False
    return all(name in recorded and _trait_matches(recorded[name], want) for name, want in wanted.items())


def _trait_matches(value: Any, want: Any) -> bool:
    if isinstance(want, Mapping):
        return isinstance(value, Mapping) and all(key in value and _trait_matches(value[key], one)
                                                  for key, one in want.items())
    if isinstance(want, (list, tuple)):
        return any(_same(value, one) for one in want)
    return _same(value, want)


def _same(value: Any, want: Any) -> bool:
    """Equal, and a flag only equals a flag (``False`` is not ``0``); an unmeasured trait (``{"not_measured": ...}``,
    ``{"error": ...}``) equals nothing."""
    if isinstance(value, bool) or isinstance(want, bool):
        return isinstance(value, bool) and isinstance(want, bool) and value is want
    if isinstance(value, Mapping):
        return False
    return value == want


def vendor_of(info: Mapping[str, Any]) -> str:
    """The text ``Expectation.vendor`` is searched in: the vendor name the transport reports and the PCI vendor id in
    hex (``NVIDIA 0x10de`` through wgpu, ``nvidia 0x10de`` through raw Vulkan); empty for a host result."""
    name, vendor_id = str(info.get("vendor") or ""), info.get("vendor_id")
    return f"{name} {vendor_id:#06x}" if isinstance(vendor_id, int) else name


def transport_of(result: Result) -> str:
    """The transport a device result ran through (results from before transports existed: wgpu)."""
    return (result.device_info or {}).get("transport", "wgpu")


def validation_of(result: Result) -> str:
    """``gpu`` for a device result run with the layer's GPU-assisted validation, else ``""``."""
    features = (result.device_info or {}).get("features") or ()
    return "gpu" if "layer:gpu-assisted" in features else ""


_MAX_ABS = re.compile(r"max abs ([0-9.eE+-]+)")
_COUNT = re.compile(r"(?:Mismatched|Unwritten) elements: (\d+)")


def error_of(result: Result) -> tuple[float | None, int | None]:
    """(largest error, elements over tolerance) of a failing result: a kernel's metrics (the elements over tolerance
    that no liberty of the spec envelope explains, and their largest error, where it judged them), a model's first
    diverging node, its output against eager, or what its reason says."""
    metrics = result.metrics or {}
    if metrics.get("max_abs") is not None:
        envelope = metrics.get("envelope") or {}
        unexplained = envelope.get("unexplained")
        over = int(metrics.get("mismatches") or 0) if unexplained is None else int(unexplained)
        error = envelope.get("unexplained_max_abs", metrics["max_abs"])
        return float(error), over + int(metrics.get("unwritten") or 0)
    where = result.node or {}
    for record in metrics.get("nodes") or []:
        if record.get("index") == where.get("index") and record.get("delegate", 0) == where.get("delegate", 0):
            worst = max(record["outputs"], key=lambda o: o.get("max_abs") or 0.0)
            return worst.get("max_abs"), worst.get("mismatches")
    found = _MAX_ABS.search(result.reason or "")
    count = _COUNT.search(result.reason or "")
    eager = (metrics.get("vs_eager") or {}).get("max_abs")
    return (float(eager) if eager is not None else float(found.group(1)) if found else None,
            int(count.group(1)) if count else None)


class ExpectationFileError(ValueError):
    """An entry of the expectation file names a device, or a trait no probe measures."""


SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it (ten times faster on this file), else the Python one."""


@functools.lru_cache(maxsize=None)
def load(path: Path = DATA) -> tuple[Expectation, ...]:
    """Every expectation of the data file.

    Raises:
        ExpectationFileError: an entry keys by device (``device:`` other than ``all``: key by ``traits``, ``vendor`` or
            ``driver``) or names a trait that ``TRAITS`` does not list.
    """
    entries = yaml.load(path.read_text(), Loader=SAFE_LOADER) or []
    return tuple(_entry(dict(e)) for e in entries)


def _entry(e: dict[str, Any]) -> Expectation:
    device = e.pop("device", "all")
    if device != "all":
        raise ExpectationFileError(f"expectation {e.get('id')}: device {device!r}: an expectation names no product; "
                                   "key it by traits, vendor or driver")
    if not e.get("case") and not (e.get("node_op") and e.get("minimal")):
        raise ExpectationFileError(f"expectation {e.get('id')}: give a case regex, or for a finding matched inside "
                                   "programs its node_op and minimal shape")
    unknown = sorted(set(e.get("traits") or {}) - set(TRAITS))
    if unknown:
        raise ExpectationFileError(f"expectation {e.get('id')}: no probe measures trait(s) {', '.join(unknown)}")
    return Expectation(**{**e, "status": tuple(e.get("status", ())), "rule": tuple(e.get("rule", ())),
                          "transport": tuple(e.get("transport", ())), "validation": tuple(e.get("validation", ())),
                          "profile": tuple(e.get("profile", ())),
                          "traits": dict(e.get("traits") or {}), "node_args": dict(e.get("node_args") or {})})


KNOWN_IN_PROGRAM = "known-bug"
"""The outcome of a finding matched inside a program: the program still fails (its result counts as a failure), and
the result names the ET-VK bug it hits, with the finding's minimal shape."""


def annotate(result: Result, expectations: Sequence[Expectation] | None = None) -> Result:
    """Attach the matching expectation: ``known`` when it explains the failure, ``unexpected-pass`` when fixed; else a
    finding matched inside the program, ``known-bug`` (still a failure)."""
    for exp in _cases_first() if expectations is None else _in_order(expectations):
        if not exp._where(result):
            continue
        if exp.explains(result):
            outcome = KNOWN_IN_PROGRAM if exp.in_programs else "known"
            result.expectation = {"id": exp.id, "link": exp.link, "reason": exp.reason, "outcome": outcome,
                                  **({"traits": sorted(exp.traits)} if exp.traits else {}),
                                  **({"minimal": exp.minimal} if exp.minimal else {})}
            return result
        if exp.applies_to(result) and Status[result.status] is Status.PASS:
            outcome = "racy-pass" if exp.racy else "unexpected-pass"
            result.expectation = {"id": exp.id, "link": exp.link, "reason": exp.reason, "outcome": outcome}
            return result
    return result


def _in_order(entries: Sequence[Expectation]) -> list[Expectation]:
    """A case's own expectations before findings matched inside programs."""
    return sorted(entries, key=lambda e: e.in_programs)


@functools.lru_cache(maxsize=None)
def _cases_first() -> list[Expectation]:
    """``load()`` in ``_in_order``, sorted once per process (``annotate`` runs for every result)."""
    return _in_order(load())


def counts_as_failure(result: Result) -> bool:
    """A failure that no expectation explains, or an unexpected pass (the expectation file needs updating)."""
    outcome = (result.expectation or {}).get("outcome")
    if outcome == "known":
        return False
    return outcome == "unexpected-pass" or Status[result.status].is_failure()
