"""A method's inputs: read from the user's file and checked against the program's input specs, or generated, seeded.

Generated inputs are seeded from the program's sha256, the method and the session seed,
so every device and every rerun sees the same data. Floats are ``N(0, 1)`` (never zeros,
never all equal); booleans are fair coins; an integer input (token ids, positions) has no
range the program can tell, so it needs ``--int-range LO:HI`` or an inputs file. Every
problem is an ``InputError``: one line naming the input and what the program expects.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vkdiff.datamodel import Method
from vkdiff.datamodel.budget import BudgetError, check_budget
from vkdiff.datamodel.npz import ZIP_ERRORS, NpzError, NpzReader


class InputError(ValueError):
    """The given inputs do not fit the method (count, shape, dtype), or cannot be generated."""


def describe(spec: dict[str, Any]) -> str:
    """``float32[1, 5, 16]`` (``≤`` sizes for a bounded dynamic tensor), ``Int``…"""
    if spec.get("kind") != "Tensor":
        return spec.get("kind", "?")
    bound = "≤" if spec.get("dynamism") else ""
    return f"{spec['dtype']}[{bound}{', '.join(map(str, spec['sizes']))}]"


def parse_shapes(text: str) -> list[list[int]]:
    """``--shapes 1x3x16,7`` → sizes of each tensor input of one call (``x`` between sizes, ``,`` between inputs).

    Raises:
        InputError: not sizes.
    """
    try:
        return [[int(s) for s in item.split("x")] if item else [] for item in text.split(",")]
    except ValueError:
        raise InputError(f"--shapes {text!r}: give each tensor input's sizes as 1x3x16, inputs separated by commas"
                         ) from None


def parse_int_range(text: str) -> tuple[int, int]:
    """``--int-range 0:256`` → (0, 256), high exclusive.

    Raises:
        InputError: not ``LO:HI`` with LO < HI.
    """
    low, sep, high = text.partition(":")
    try:
        bounds = (int(low), int(high))
    except ValueError:
        bounds = (0, 0)
    if not sep or bounds[0] >= bounds[1]:
        raise InputError(f"--int-range {text!r}: give LO:HI with LO < HI (HI exclusive), e.g. 0:32000")
    return bounds


def _seed(sha256: str, method: str, call: int, session_seed: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{sha256}:{method}:{call}:{session_seed}".encode()).digest()[:8], "little")


def generate(method: Method, sha256: str, *, sizes: Sequence[Sequence[int]] | None = None, call: int = 0,
             session_seed: int = 0, int_range: tuple[int, int] | None = None) -> list[Any]:
    """Seeded inputs for one call (``sizes``: each tensor input's sizes, when below the bound).

    Raises:
        InputError: an integer input without ``int_range``, or sizes beyond a tensor's bound.
    """
    rng = np.random.default_rng(_seed(sha256, method.name, call, session_seed))
    tensors = [i for i, spec in enumerate(method.input_specs()) if spec.get("kind") == "Tensor"]
    if sizes is not None and len(sizes) != len(tensors):
        raise InputError(f"--shapes gives {len(sizes)} sizes, method {method.name!r} has {len(tensors)} tensor "
                         f"inputs ({', '.join(describe(method.input_specs()[i]) for i in tensors)})")
    out = []
    for position, spec in enumerate(method.input_specs()):
        name = f"input {position} ({describe(spec)})"
        if spec.get("kind") != "Tensor":
            if spec.get("kind") != "Int" or int_range is None:
                raise InputError(f"method {method.name!r} {name}: a scalar input vkdiff cannot invent; give "
                                 f"--inputs FILE" + (" or --int-range LO:HI" if spec.get("kind") == "Int" else ""))
            out.append(int(rng.integers(*int_range)))
            continue
        shape = list(sizes[tensors.index(position)]) if sizes is not None else list(spec["sizes"])
        _check_bound(method, position, spec, shape)
        out.append(_draw(rng, spec["dtype"], shape, int_range, f"method {method.name!r} {name}"))
    return out


def _draw(rng: np.random.Generator, dtype: str, shape: list[int], int_range, what: str) -> np.ndarray:
    if dtype in ("float32", "float16", "float64", "bfloat16"):
        return rng.standard_normal(shape).astype("float32" if dtype == "bfloat16" else dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if int_range is None:
        raise InputError(f"{what}: an integer input (token ids, positions?) whose valid range vkdiff cannot know; "
                         f"give --int-range LO:HI or --inputs FILE")
    return rng.integers(int_range[0], int_range[1], size=shape).astype(dtype)


def _check_bound(method: Method, position: int, spec: dict[str, Any], shape: Sequence[int], where: str = "") -> None:
    """ExecuTorch's ``TensorImpl::internal_resize_contiguous``: the rank never changes; a static tensor keeps its
    sizes; a dynamic one takes any sizes whose element count is within its bound's (its capacity)."""
    bound = list(spec["sizes"])
    static = not spec.get("dynamism")
    prefix = f"{where}: " if where else ""
    if len(shape) != len(bound) or (static and list(shape) != bound):
        limit = "exactly" if static else f"rank {len(bound)}, at most {math.prod(bound)} elements, like"
        raise InputError(f"{prefix}method {method.name!r} input {position}: sizes {list(shape)} do not fit "
                         f"{describe(spec)} ({limit} {bound})")
    if math.prod(shape) > math.prod(bound):
        raise InputError(f"{prefix}method {method.name!r} input {position}: sizes {list(shape)} hold "
                         f"{math.prod(shape)} elements, more than the {math.prod(bound)} of its bound {bound} "
                         f"({describe(spec)}; ExecuTorch refuses to resize past a tensor's capacity)")


def load_calls(paths: Sequence[Path], method: Method) -> list[list[Any]]:
    """Every call's inputs: one file per call (``--inputs`` repeated), or one ``.npz`` keyed by call
    (``call0/x``, ``call1/x``…: the part before ``/`` names the call, calls and inputs in order of their numbers).

    Raises:
        InputError: as ``load``, naming the call.
    """
    if len(paths) == 1 and paths[0].suffix == ".npz" and paths[0].is_file() and _keyed_by_call(paths[0]):
        return _load_npz_calls(paths[0], method)
    return [load(path, method) for path in paths]


def _keyed_by_call(path: Path) -> bool:
    try:
        with NpzReader(path, str(path)) as npz:
            return any("/" in key for key in npz.members)
    except (NpzError, BudgetError) as exc:
        raise InputError(f"--inputs {exc}") from None


def _load_npz_calls(path: Path, method: Method) -> list[list[Any]]:
    """An ``.npz`` of several calls, each call's headers checked before its data is read."""
    try:
        with NpzReader(path, str(path)) as npz:
            calls: dict[str, list[str]] = {}
            for key in npz.members:
                call, sep, _ = key.partition("/")
                if not sep:
                    raise InputError(f"--inputs {path}: key {key!r} names no call; key every array as CALL/INPUT "
                                     f"(call0/x) or none")
                calls.setdefault(call, []).append(key)
            out = []
            for call in sorted(calls, key=_npz_order):
                where = f"--inputs {path} call {call!r}"
                keys = sorted(calls[call], key=lambda k: _npz_order(k.partition("/")[2]))
                _check_count(len(keys), method, where)
                for position, (key, spec) in enumerate(zip(keys, method.input_specs())):
                    _check_kind(position, spec, npz.members[key].shape, npz.members[key].dtype, method, where)
                out.append(check([npz.read(k) for k in keys], method, where))
            return out
    except (NpzError, BudgetError) as exc:
        raise InputError(f"--inputs {exc}") from None


def load(path: Path, method: Method) -> list[Any]:
    """Inputs from an ``.npz`` (keys in order: ``arr_0``… or ``0``, ``1``…; no pickles) or a ``.pt`` (a tuple or
    list of tensors; loaded with ``weights_only=True``), checked against the method's specs.

    An ``.npz``'s headers are checked (count, shapes, dtypes) before any array is read, and a ``.pt``'s
    declared sizes against the host memory budget before torch reads it.

    Raises:
        InputError: unreadable, over the budget, wrong count, shape or dtype (named with the expected spec).
    """
    if not path.is_file():
        raise InputError(f"--inputs {path}: no such file")
    try:
        if path.suffix == ".npz":
            values = _load_npz(path, method)
        elif path.suffix == ".pt":
            values = _load_pt(path, method)
        else:
            raise InputError(f"--inputs {path}: give an .npz (numpy.savez) or a .pt (torch.save of a tuple of "
                             f"tensors)")
    except (NpzError, BudgetError) as exc:
        raise InputError(f"--inputs {exc}") from None
    return check(values, method, f"--inputs {path}")


def _npz_order(key: str) -> tuple[int, str]:
    tail = key.rsplit("_", 1)[-1]
    return (int(tail) if tail.isdigit() else 1 << 30, key)


def _load_npz(path: Path, method: Method) -> list[Any]:
    """The archive's arrays in order, each header checked against its input spec before the data is read."""
    with NpzReader(path, str(path)) as npz:
        keys = sorted(npz.members, key=_npz_order)
        _check_count(len(keys), method, f"--inputs {path}")
        for position, (key, spec) in enumerate(zip(keys, method.input_specs())):
            _check_kind(position, spec, npz.members[key].shape, npz.members[key].dtype, method, f"--inputs {path}")
        return [npz.read(k) for k in keys]


def _load_pt(path: Path, method: Method) -> list[Any]:
    import zipfile

    import torch

    try:
        with zipfile.ZipFile(path) as archive:
            declared = sum(info.file_size for info in archive.infolist())
    except ZIP_ERRORS as exc:
        raise InputError(f"--inputs {path}: not a .pt written by torch.save ({type(exc).__name__})") from None
    check_budget(declared, str(path))
    try:
        # the user's --inputs, a file they named and trust as a checkpoint; even so, tensors only (no pickled code)
        loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # torch raises many kinds for a bad or unsafe file
        raise InputError(f"--inputs {path}: not a .pt of tensors torch can load safely "
                         f"({type(exc).__name__})") from None
    if isinstance(loaded, torch.Tensor):
        loaded = [loaded]
    if not isinstance(loaded, (tuple, list)):
        raise InputError(f"--inputs {path}: holds a {type(loaded).__name__}; save a tuple or list of the method's "
                         f"inputs in order (torch.save((x, y), path))")
    bad = [type(x).__name__ for x in loaded if not isinstance(x, (torch.Tensor, int, float, bool))]
    if bad:
        raise InputError(f"--inputs {path}: holds a {bad[0]}; give tensors (and plain numbers for scalar inputs)")
    _check_count(len(loaded), method, f"--inputs {path}")
    for position, (x, spec) in enumerate(zip(loaded, method.input_specs())):
        if isinstance(x, torch.Tensor):
            _check_kind(position, spec, tuple(x.shape), _numpy_dtype(x.dtype, path), method, f"--inputs {path}")
    return [x.detach().float().numpy() if isinstance(x, torch.Tensor) and x.dtype == torch.bfloat16
            else x.detach().numpy() if isinstance(x, torch.Tensor) else x for x in loaded]


def _numpy_dtype(dtype, path: Path) -> np.dtype:
    """The numpy dtype a tensor of ``dtype`` becomes (bfloat16 as float32)."""
    import torch

    if dtype == torch.bfloat16:
        return np.dtype("float32")
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except (TypeError, RuntimeError):
        raise InputError(f"--inputs {path}: a {dtype} tensor, which numpy cannot hold; convert it to float32") from None


def check(values: Sequence[Any], method: Method, where: str) -> list[Any]:
    """``values`` as the method's inputs, each checked against its spec (count, rank, bound, dtype kind); ``where``
    starts every message (``--inputs x.npz``)."""
    _check_count(len(values), method, where)
    out = []
    for position, (value, spec) in enumerate(zip(values, method.input_specs())):
        array = np.asarray(value)
        _check_kind(position, spec, array.shape, array.dtype, method, where)
        if spec.get("kind") != "Tensor":
            out.append(array.item())
            continue
        out.append(array.astype(np.dtype("float32" if spec["dtype"] == "bfloat16" else spec["dtype"]), copy=False))
    return out


def _check_count(count: int, method: Method, where: str) -> None:
    specs = method.input_specs()
    if count != len(specs):
        raise InputError(f"{where}: {count} inputs, method {method.name!r} takes {len(specs)} "
                         f"({', '.join(describe(s) for s in specs)})")


def _check_kind(position: int, spec: dict[str, Any], shape: Sequence[int], dtype: np.dtype, method: Method,
                where: str) -> None:
    """An input's shape and dtype (known before its data is read) against its spec."""
    if spec.get("kind") != "Tensor":
        if math.prod(shape) != 1 or dtype.kind not in "biuf":
            raise InputError(f"{where}: input {position} is {dtype}{list(shape)}, method {method.name!r} "
                             f"expects a number ({describe(spec)})")
        return
    _check_bound(method, position, spec, shape, where)
    wanted = np.dtype("float32" if spec["dtype"] == "bfloat16" else spec["dtype"])
    if dtype.kind != wanted.kind and not (dtype.kind in "iu" and wanted.kind in "iu"):
        raise InputError(f"{where}: input {position} is {dtype}{list(shape)}, method "
                         f"{method.name!r} expects {describe(spec)}")
