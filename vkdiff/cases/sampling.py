"""A seeded sample of each op's kernel cases that still reaches every knob value and every edge.

``vkdiff run`` runs every case; the project's test run (``pytest``, ``vkdiff_sample`` in the
ini file) takes a sample of each suite that registers ``sampled=True``: the cases are shuffled
with a generator seeded from the op name and the session seed, then taken greedily, each
covering the most not yet covered *traits* — its dtype, storage, memory layout, option values,
input flags (``special``, ``subnormal``: the edge cases), rank and packed-width residue (mod 4)
— until every trait of the suite is covered and at least ``minimum`` cases are taken. The
foundation suites (4-bit linears, embedding, LLM ops) register ``sampled=False`` and run whole.

Model cases are sampled across the catalogue: one case of every family (the id's stem:
``llama_proj``), then enough others that every recipe and partitioner token of the ids
(``llama_proj[8da4w-fp32zp-vulkan-buffer]``: ``8da4w``, ``fp32zp``, ``vulkan``, ``buffer``) runs
in some case: every model, recipe and knob still runs, not every combination.

Example::

    >>> from vkdiff.cases.kernels import all_cases
    >>> cases = all_cases(r"^relu\\[")
    >>> picked = sample_cases(cases, minimum=2)
    >>> len(picked) < len(cases) and traits_of(picked) == traits_of(cases)
    True
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Sequence

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


def model_traits(case_id: str) -> frozenset[str]:
    """The recipe and partitioner tokens of a model case id (``a[8da4w-vulkan-fp16]`` → 8da4w, vulkan, fp16)."""
    return frozenset(case_id.partition("[")[2].rstrip("]").split("-"))


def sampled_models(cases: Sequence[Any], *, minimum: int, seed: int = 0) -> list[Any]:
    """Model ``cases`` (anything with an ``id``) cut to a seeded sample: one case of every family (the id's stem),
    then, across families, the cases that cover the most recipe and partitioner tokens not yet covered, until
    every token of the catalogue runs somewhere; ``minimum`` 0 keeps every case."""
    if minimum <= 0:
        return list(cases)
    families: dict[str, list[Any]] = {}
    for case in cases:
        families.setdefault(case.id.partition("[")[0], []).append(case)
    missing = set().union(*(model_traits(c.id) for c in cases))
    keep: list[Any] = []
    for family, group in families.items():
        order = [group[i] for i in _rng(f"model:{family}", seed).permutation(len(group))]
        keep.append(max(order, key=lambda c: len(model_traits(c.id) & missing)))
        missing -= model_traits(keep[-1].id)
    rest = [cases[i] for i in _rng("model:*", seed).permutation(len(cases)) if cases[i] not in keep]
    while missing and rest:
        best = max(rest, key=lambda c: len(model_traits(c.id) & missing))
        rest.remove(best)
        keep.append(best)
        missing -= model_traits(best.id)
    chosen = {id(c) for c in keep}
    return [c for c in cases if id(c) in chosen]
