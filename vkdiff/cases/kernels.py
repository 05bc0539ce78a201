"""Kernel cases: one ET-VK operator at given shapes, dtype, storage and knobs, declared once.

Suites register under the full operator name, as ExecuTorch's ``op_tests/cases.py``
does, each with the function that draws the op's arguments (by schema name) from a
seeded generator; the reference and the launcher of the same name do the rest. Case
ids are derived from the shapes and knobs (``linear_q4gsw[M13-K256-N40-g32-fp16-buffer]``).
One module per op family lives in ``vkdiff.cases.kernel_suites``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import pkgutil
import re
from typing import Any, Callable, Iterable, Literal

import numpy as np

DType = Literal["fp32", "fp16", "int32", "int8", "bool"]
IoStorage = Literal["buffer", "texture3d"]

NP_DTYPES: dict[str, type] = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32, "int8": np.int8,
                              "bool": np.bool_}
"""Case dtype names → numpy dtypes."""

OPTION_TOKENS: dict[str, str] = {"weight_storage": "w", "out_storage": "out", "out_layout": "out", "route": ""}
"""Id prefix of each launcher option's value (``weight_storage=buffer`` → ``wbuffer``); ``storage.<input>`` options
(one input's own storage) show as the input's name (``storage.k=texture3d`` → ``ktexture3d``; a placement's colon as a
dot: ``input_bbuffer.int8x4_4c1w``)."""

NAMED_OPTIONS = frozenset({"impl"})
"""Options a case's name already says (``linear_q4gsw_tiled`` forces ``impl=QuantizedLinear.cpp``): not in ids."""

XS, S, M1, M2, L, XL = 3, 7, 13, 31, 67, 113
"""ExecuTorch's prime dimension constants (``op_tests/cases.py``), for shapes that break tilings."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class KernelCase:
    """One hermetic kernel case: operator, shapes, knobs."""

    op: str
    """Full operator name (``et_vk.linear_q4gsw.default``): the key of its suite, reference and launcher."""
    name: str
    """Id stem (``linear_q4gsw``)."""
    shape: tuple[tuple[str, int], ...]
    """Named sizes in id order, e.g. ``(("M", 13), ("K", 256), ("N", 40), ("g", 32))``."""
    dtype: DType
    """Activation/output dtype."""
    storage: IoStorage
    """Input/output storage."""
    options: tuple[tuple[str, str], ...] = ()
    """Launcher options that leave the inputs unchanged (``(("weight_storage", "buffer"),)``)."""
    flags: tuple[str, ...] = ()
    """Input variations by name (``("bias",)``); part of the data id."""
    layout: str = "width"
    """Memory layout of the inputs and outputs (``width``, ``height``, ``channels`` packed); ids name it unless width."""

    def _knobs(self, *, storage: bool) -> str:
        parts = [self.dtype]
        if storage:
            parts.append(self.storage)
            if self.layout != "width":
                parts.append(self.layout)
            parts += [f"{OPTION_TOKENS.get(k, k.removeprefix('storage.'))}{v.replace(':', '.')}"
                      for k, v in self.options if k not in NAMED_OPTIONS]
        parts += list(self.flags)
        return "-".join(parts)

    def _with_shape(self, knobs: str) -> str:
        dims = "-".join(f"{k}{v}" for k, v in self.shape)
        return f"{self.name}[{dims}-{knobs}]"

    @property
    def variant(self) -> str:
        """The knob part of the id (everything after the shapes), a display label."""
        return self._knobs(storage=True)

    @property
    def id(self) -> str:
        return self._with_shape(self.variant)

    @property
    def data_id(self) -> str:
        """The id without the storage knobs: cases that differ only in storage or layout get identical inputs."""
        return self._with_shape(self._knobs(storage=False))

    @property
    def knobs(self) -> dict[str, Any]:
        """Every knob by name, as results record them."""
        return {"dtype": self.dtype, "storage": self.storage, **({"layout": self.layout} if self.layout != "width" else {}),
                **dict(self.options), **{f: True for f in self.flags}}

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.shape)

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(NP_DTYPES[self.dtype])

    def size(self, name: str) -> int:
        return self.sizes[name]

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def seed(self, session_seed: int = 0) -> int:
        """Inputs are seeded from a hash of the data id plus the session seed.

        Storage variants share inputs, so their outputs are comparable and one
        reference serves them all.
        """
        digest = hashlib.sha256(f"{self.data_id}:{session_seed}".encode()).digest()
        return int.from_bytes(digest[:4], "little")


ArgsFn = Callable[[KernelCase, np.random.Generator], dict[str, Any]]


@dataclasses.dataclass(kw_only=True, frozen=True)
class Suite:
    """The cases of one operator and how their arguments are drawn."""

    op: str
    """Full operator name."""
    cases: Callable[[], Iterable[KernelCase]]
    """Generator of the cases."""
    make_args: ArgsFn
    """``make_args(case, rng)``: the op's arguments by schema name (never all-equal data)."""
    sampled: bool = True
    """The project's test run takes a seeded sample of these cases (``vkdiff.cases.sampling``); False: every case
    runs in every test run (the foundation sweeps)."""
    resizable: tuple[str, ...] | Callable[[KernelCase], tuple[str, ...]] = ()
    """Named sizes of graph inputs that may shrink at run time: each case also runs at smaller sizes on the graph
    built for its own (``below_bound``); empty: the op's inputs cannot be resized (constants only). A function
    of the case where that depends on it (a concat dim, a squeezed dim, a bias sized by M)."""

    def resizable_of(self, case: KernelCase) -> tuple[str, ...]:
        return tuple(self.resizable(case)) if callable(self.resizable) else self.resizable


SUITES: dict[str, Suite] = {}
"""Registered suites by operator name."""


CasesFn = Callable[[], Iterable[KernelCase]]


def register_test_suite(op: str, *, make_args: ArgsFn, sampled: bool = True,
                        resizable: tuple[str, ...] | Callable[[KernelCase], tuple[str, ...]] = ()
                        ) -> Callable[[CasesFn], CasesFn]:
    """Register a generator of the cases of ``op``, with the function that draws their arguments.

    Raises:
        ValueError: ``op`` already has a suite defined elsewhere.
    """
    def wrap(fn: CasesFn) -> CasesFn:
        if op in SUITES and not _same_definition(SUITES[op].cases, fn):
            raise ValueError(f"a kernel suite for {op} is already registered ({SUITES[op].cases.__module__})")
        SUITES[op] = Suite(op=op, cases=fn, make_args=make_args, sampled=sampled,
                           resizable=resizable if callable(resizable) else tuple(resizable))
        return fn
    return wrap


def _same_definition(a: Callable, b: Callable) -> bool:
    """The same function, or the same one from a re-import of its module (pytester drops modules between runs)."""
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


_LOADED: list[bool] = []
"""Non-empty once ``load_suites`` has imported every suite module (walking the package costs 1 ms a call)."""


def load_suites() -> dict[str, Suite]:
    """Import every module of ``vkdiff.cases.kernel_suites`` (each registers its suites) once, in the order of their
    names whatever group holds them: the case order does not follow the folders."""
    from vkdiff.cases import kernel_suites

    if _LOADED and SUITES:
        return SUITES
    found = [m.name for m in pkgutil.walk_packages(kernel_suites.__path__, f"{kernel_suites.__name__}.")
             if not m.ispkg]
    for name in sorted(found, key=lambda n: n.rsplit(".", 1)[-1]):
        importlib.import_module(name)
    _LOADED.append(True)
    return SUITES


def suite_of(case: KernelCase) -> Suite:
    return load_suites()[case.op]


def all_cases(pattern: str | None = None) -> list[KernelCase]:
    """Every registered kernel case whose id matches the regex ``pattern`` (search, not full match)."""
    regex = re.compile(pattern) if pattern else None
    cases = [c for suite in load_suites().values() for c in suite.cases()]
    return [c for c in cases if regex is None or regex.search(c.id)]


def below_bound(case: KernelCase) -> list[KernelCase]:
    """Two or more smaller versions of ``case`` (its suite's ``resizable`` sizes shrunk, the rest kept), each
    run on the graph built for ``case``; none when every resizable size is already 1.

    Every resizable size becomes ``ceil(s/2)``, then ``s - 1`` (a packed dim crosses a texel boundary
    differently each time), then 1.

    Example::

        >>> from vkdiff.cases.kernels import all_cases
        >>> [c.id for c in below_bound(all_cases(r"^relu\\[W67-fp32-buffer\\]$")[0])]
        ['relu[W34-fp32-buffer]', 'relu[W66-fp32-buffer]', 'relu[W1-fp32-buffer]']
    """
    names = set(suite_of(case).resizable_of(case))
    smaller: list[KernelCase] = []
    for shrink in (lambda s: (s + 1) // 2, lambda s: s - 1, lambda s: 1):
        shape = tuple((k, max(1, shrink(v)) if k in names else v) for k, v in case.shape)
        if shape != case.shape and all(c.shape != shape for c in smaller):
            smaller.append(dataclasses.replace(case, shape=shape))
    return smaller
