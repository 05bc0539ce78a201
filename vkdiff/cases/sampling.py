"""A seeded sample of each op's kernel cases that still reaches every knob value and every edge.

``vkdiff run`` runs every case; the project's test run (``pytest``, ``vkdiff_sample`` in the
ini file) takes a sample of each suite that registers ``sampled=True``: the cases are shuffled
with a generator seeded from the op name and the session seed, then taken greedily, each
covering the most not yet covered *traits* — its dtype, storage, memory layout, option values,
input flags (``special``, ``subnormal``: the edge cases), rank and packed-width residue (mod 4)
— until every trait of the suite is covered and at least ``minimum`` cases are taken. The
foundation suites (4-bit linears, embedding, LLM ops) register ``sampled=False`` and run whole.

Example::

    >>> from vkdiff.cases.kernels import all_cases
    >>> cases = all_cases(r"^relu\\[")
    >>> picked = sample_cases(cases, minimum=2)
    >>> len(picked) < len(cases) and traits_of(picked) == traits_of(cases)
    True
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Sequence

import numpy as np

from vkdiff.cases.kernels import KernelCase, load_suites


def traits(case: KernelCase) -> frozenset[str]:
    """What a sample must reach at least once: knob values, flags, rank, packed-width residue."""
    sizes = [size for _, size in case.shape]
    found = {f"dtype={case.dtype}", f"storage={case.storage}", f"layout={case.layout}", f"rank={len(sizes)}",
             *(f"{key}={value}" for key, value in case.options), *(f"flag={flag}" for flag in case.flags)}
    if sizes:
        found.add(f"width%4={sizes[-1] % 4}")
    return frozenset(found)


def traits_of(cases: Iterable[KernelCase]) -> frozenset[str]:
    return frozenset().union(*(traits(c) for c in cases))


def _rng(op: str, seed: int) -> np.random.Generator:
    digest = hashlib.sha256(f"sample:{op}:{seed}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def sample_cases(cases: Sequence[KernelCase], *, minimum: int, seed: int = 0) -> list[KernelCase]:
    """The sample of one op's ``cases`` (see the module docstring), in their declaration order."""
    if not cases:
        return []
    order = [cases[i] for i in _rng(cases[0].op, seed).permutation(len(cases))]
    missing, taken = set(traits_of(order)), []
    while order and (missing or len(taken) < minimum):
        best = max(order, key=lambda c: len(traits(c) & missing))
        taken.append(best)
        order.remove(best)
        missing -= traits(best)
    chosen = {id(c) for c in taken}
    return [c for c in cases if id(c) in chosen]


def sampled(cases: Sequence[KernelCase], *, minimum: int, seed: int = 0) -> list[KernelCase]:
    """``cases`` with each sampled suite's cases cut to its sample; ``minimum`` 0 keeps every case.

    Cases keep their order; a suite with ``sampled=False`` keeps all of its cases.
    """
    if minimum <= 0:
        return list(cases)
    suites = load_suites()
    by_op: dict[str, list[KernelCase]] = {}
    for case in cases:
        by_op.setdefault(case.op, []).append(case)
    keep = {id(c) for op, group in by_op.items()
            for c in (sample_cases(group, minimum=minimum, seed=seed) if suites[op].sampled else group)}
    return [c for c in cases if id(c) in keep]
