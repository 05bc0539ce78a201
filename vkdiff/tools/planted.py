"""Planted faults: how often a verdict catches a kernel that reads one wrong value.

A fault changes what the device is given (one 4-bit code, one scale, one zero point, or
one row) while the reference keeps the true arguments, so the device computes what a
kernel with that one misread would. The verdict is the one ``run_case`` gives; a trial
is caught when it is not PASS. Trials only run on cases whose clean run passes.

``code``
    one 4-bit code moved by one (toward the middle at 0 and 15);
``scale``
    one group's scale read from the neighbouring output channel (or group, for tables);
``zero_point``
    q4gsw weights are symmetric (zero point 8): every code of one group moved by one, as a
    zero point of 7 or 9 would; dq8ca's per-token activation zero point moved by one (not for
    one row: ET-VK's decode kernel computes the weight-only linear and reads no zero point);
``row``
    one output channel (or an indexed embedding row) reading its neighbour's row.

dq8ca's weight sums keep their true values, as a kernel misreading a code would see them.

Each is applied where the output can show it: an embedding fault lands on an indexed row.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from vkdiff.cases.kernels import KernelCase
from vkdiff.device.runtime.context import DeviceContext
from vkdiff.datamodel import Status
from vkdiff.executors import references
from vkdiff.executors import kernel as executor
from vkdiff.harness import kernels
from vkdiff.verdicts.kernels import UNMODELLED_FLAG, record_launch

KINDS = ("code", "scale", "zero_point", "row")

LINEAR_Q4GSW = "et_vk.linear_q4gsw.default"
DQ8CA = "et_vk.linear_dq8ca_q4gsw.default"
EMBEDDING_Q4GSW = "et_vk.embedding_q4gsw.default"


def _nudge_nibble(packed: np.ndarray, row: int, index: int, rng: np.random.Generator) -> None:
    """Move code ``index`` (nibble order: even low, odd high) of ``row`` by one, in place."""
    byte, high = index // 2, index % 2
    value = int(packed[row, byte])
    code = (value >> 4) if high else (value & 0xF)
    step = 1 if code == 0 else -1 if code == 15 else int(rng.choice((-1, 1)))
    code += step
    packed[row, byte] = ((code << 4) | (value & 0xF)) if high else ((value & 0xF0) | code)


def _shift_codes(packed: np.ndarray, row: int, start: int, count: int, step: int) -> None:
    """Move ``count`` codes of ``row`` from ``start`` by ``step``, clipped to 0..15 (a zero point off by one)."""
    for index in range(start, start + count):
        byte, high = index // 2, index % 2
        value = int(packed[row, byte])
        code = (value >> 4) if high else (value & 0xF)
        code = min(15, max(0, code + step))
        packed[row, byte] = ((code << 4) | (value & 0xF)) if high else ((value & 0xF0) | code)


def _neighbour(index: int, size: int) -> int:
    return index + 1 if index + 1 < size else index - 1


def _linear(args: dict[str, Any], kind: str, rng: np.random.Generator, weights_key: str) -> dict[str, Any] | None:
    """A fault in a 4-bit linear: weights ``[N, K/2]``, transposed scales ``[K/gs, N4*4]``."""
    weights = args[weights_key].copy()
    n, k, g = weights.shape[0], weights.shape[1] * 2, int(args["group_size"])
    channel = int(rng.integers(n))
    if kind == "code":
        _nudge_nibble(weights, channel, int(rng.integers(k)), rng)
    elif kind == "scale":
        scales = args["weight_scales"].copy()
        group = int(rng.integers(k // g))
        scales[group, channel] = scales[group, _neighbour(channel, n)]
        return {**args, "weight_scales": scales}
    elif kind == "zero_point":
        if "input_zp" in args:
            if args["input_zp"].size == 1:
                return None
            zp = args["input_zp"].copy()
            row = int(rng.integers(zp.size))
            flat = zp.reshape(-1)
            flat[row] = flat[row] + (1 if flat[row] < 127 else -1)
            return {**args, "input_zp": zp}
        _shift_codes(weights, channel, int(rng.integers(k // g)) * g, g, int(rng.choice((-1, 1))))
    elif kind == "row":
        weights[channel] = weights[_neighbour(channel, n)]
    return {**args, weights_key: weights}


def _embedding(args: dict[str, Any], kind: str, rng: np.random.Generator) -> dict[str, Any] | None:
    """A fault in an indexed row of a 4-bit table: weight ``[V, D/2]``, scales ``[V, D/gs]``."""
    weight, scales = args["weight"].copy(), args["weight_scales"].copy()
    row = int(rng.choice(np.unique(np.asarray(args["indices"]))))
    d, g = weight.shape[1] * 2, int(args["group_size"])
    if kind == "code":
        _nudge_nibble(weight, row, int(rng.integers(d)), rng)
    elif kind == "scale":
        group = int(rng.integers(d // g))
        scales[row, group] = scales[row, _neighbour(group, d // g)]
    elif kind == "zero_point":
        _shift_codes(weight, row, int(rng.integers(d // g)) * g, g, int(rng.choice((-1, 1))))
    elif kind == "row":
        other = _neighbour(row, weight.shape[0])
        weight[row], scales[row] = weight[other], scales[other]
    return {**args, "weight": weight, "weight_scales": scales}


PLANTERS: dict[str, Callable[[dict[str, Any], str, np.random.Generator], dict[str, Any] | None]] = {
    LINEAR_Q4GSW: lambda args, kind, rng: _linear(args, kind, rng, "weights"),
    DQ8CA: lambda args, kind, rng: _linear(args, kind, rng, "weights"),
    EMBEDDING_Q4GSW: _embedding,
}
"""Planters by op: (true arguments, kind, rng) → the arguments with that fault (copies; the input is untouched)."""


def plant(op: str, args: Mapping[str, Any], kind: str, rng: np.random.Generator) -> dict[str, Any] | None:
    """``args`` with one fault of ``kind`` (see the module docstring), or None where the kind does not apply.

    Raises:
        KeyError: no planter for ``op``, or an unknown kind.
    """
    if kind not in KINDS:
        raise KeyError(f"unknown fault kind {kind!r}; kinds are {', '.join(KINDS)}")
    return PLANTERS[op](dict(args), kind, rng)


def trial_rng(case: KernelCase, kind: str, trial: int) -> np.random.Generator:
    """The seed of one trial, from the case id, the kind and the trial number."""
    digest = hashlib.sha256(f"{case.id}|{kind}|{trial}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


POLICIES = ("tolerance", "arithmetic")
"""``tolerance``: the policy row alone (vkdiff before arithmetic models); ``arithmetic``: also within ``ulps`` of
the reference with the variant's declared rounding (what ``run_case`` does)."""


def judge(case: KernelCase, device: str, launched, clean: references.Prepared) -> dict[str, str]:
    """The status of one launch under each policy (``unmodelled``: the arithmetic check stood aside, the device
    computing in another order than the variant declares)."""
    statuses = {}
    for policy in POLICIES:
        result = kernels.base_result(case, device, Status.ERROR)
        record_launch(result, executor.checked(case.op, launched, clean, emulate=policy == "arithmetic"))
        statuses[policy] = result.status
        if UNMODELLED_FLAG in result.flags:
            statuses["unmodelled"] = "yes"
    return statuses


@dataclasses.dataclass(kw_only=True)
class Trial:
    """One planted fault and its status under each policy."""

    case: str
    kind: str
    statuses: dict[str, str]

    def caught(self, policy: str) -> bool:
        """Whether the verdict under ``policy`` was not PASS."""
        return self.statuses[policy] != "PASS"


def run_trial(ctx: DeviceContext, case: KernelCase, clean: references.Prepared, kind: str, trial: int) -> Trial | None:
    """Launch ``case`` with one planted fault and judge it against the true reference (None: the kind does not
    apply to the case)."""
    faulty = plant(case.op, clean.args, kind, trial_rng(case, kind, trial))
    if faulty is None:
        return None
    launched = executor.launch(ctx, case, dataclasses.replace(clean, args=faulty, emulations={}))
    return Trial(case=case.id, kind=kind, statuses=judge(case, ctx.info.slug, launched, clean))


@dataclasses.dataclass(kw_only=True)
class Clean:
    """A candidate case run without a fault: its status under each policy (trials need a PASS under both)."""

    case: str
    statuses: dict[str, str]


def clean_runs(ctx: DeviceContext, cases: list[KernelCase],
               want: int) -> Iterator[tuple[KernelCase, references.Prepared | None, Clean]]:
    """Run candidates until ``want`` pass under both policies (a case failing under either is a finding, not a
    baseline); each with its prepared arguments (None when it did not run: a device without a feature)."""
    found = 0
    for case in cases:
        if found >= want:
            return
        clean = references.prepare_case(case)
        try:
            launched = executor.launch(ctx, case, clean)
        except Exception as exc:  # a case the device cannot run is no candidate
            yield case, None, Clean(case=case.id, statuses={p: type(exc).__name__ for p in POLICIES})
            continue
        statuses = judge(case, ctx.info.slug, launched, clean)
        found += all(statuses[policy] == "PASS" for policy in POLICIES)
        yield case, clean, Clean(case=case.id, statuses=statuses)
