"""An ``.npz`` from elsewhere read as data: every member's header first, sizes checked, then bounded reads.

``np.load`` allocates the shape a member's header declares and decompresses into it, so
a 6 MB archive of zeros declaring 6.7 GB fills 6.7 GB before anyone looks at the shape.
Here the headers are read first (shape and dtype, no data), object arrays are refused,
each member's compressed stream must hold exactly the bytes its header declares, and
the arrays together must fit the host memory budget; only then is any array
allocated, and decompression stops at its declared end.
"""

from __future__ import annotations

import dataclasses
import io
import math
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Iterator

import numpy as np

from vkdiff.datamodel.budget import check_budget

MAX_MEMBERS = 4096
"""More arrays than any program's inputs or constants: a larger archive is refused before reading its headers."""
MAX_HEADER = 10_000
"""Longest ``.npy`` header accepted (numpy's own default limit)."""
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError, zlib.error,
                NotImplementedError, struct.error, RuntimeError, SyntaxError, TypeError, KeyError)
"""What a malformed archive makes zipfile and numpy's header parser raise."""


class NpzError(ValueError):
    """The archive cannot be read as plain arrays within the budget (one line naming it)."""


@dataclasses.dataclass(frozen=True)
class Member:
    """One array's header: what reading it will allocate."""

    key: str
    """The name ``np.savez`` gave it (the member name without ``.npy``)."""
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    nbytes: int
    """Bytes the array takes (from the header; the member's stream is checked to hold exactly these)."""


class NpzReader:
    """Headers on opening, arrays on request.

    Example::

        >>> buffer = io.BytesIO(); np.savez(buffer, x=np.arange(3))
        >>> with NpzReader(buffer.getvalue(), "x.npz") as npz:
        ...     npz.members["x"].shape, npz.read("x").tolist()
        ((3,), [0, 1, 2])
    """

    def __init__(self, source: bytes | Path, what: str, *, budget: int | None = None):
        self.what = what
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source)
        except ZIP_ERRORS as exc:
            raise NpzError(f"{what}: not an .npz archive ({_reason(exc)})") from None
        infos = self._zip.infolist()
        self._infos: dict[str, zipfile.ZipInfo] = {}
        if len(infos) > MAX_MEMBERS:
            self._zip.close()
            raise NpzError(f"{what}: {len(infos)} members, more than the {MAX_MEMBERS} vkdiff reads")
        try:
            self.members = {m.key: m for m in map(self._header, infos)}
            check_budget(sum(m.nbytes for m in self.members.values()), what, budget=budget)
        except BaseException:
            self._zip.close()
            raise

    def __enter__(self) -> "NpzReader":
        return self

    def __exit__(self, *exc) -> None:
        self._zip.close()

    def _header(self, info: zipfile.ZipInfo) -> Member:
        key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        try:
            with self._zip.open(info) as stream:
                shape, fortran, dtype = _read_header(stream)
                offset = stream.tell()
        except ZIP_ERRORS as exc:
            raise NpzError(f"{self.what}: member {key!r}: not a .npy array ({_reason(exc)})") from None
        if dtype.hasobject:
            raise NpzError(f"{self.what}: member {key!r} is an object array (pickles are refused)")
        if any(not isinstance(s, int) or s < 0 for s in shape):
            raise NpzError(f"{self.what}: member {key!r}: bad shape {shape}")
        nbytes = math.prod(shape) * dtype.itemsize
        if info.file_size != offset + nbytes:
            raise NpzError(f"{self.what}: member {key!r} declares {dtype}{list(shape)} ({nbytes} bytes) but holds "
                           f"{info.file_size - offset}")
        self._infos[key] = info
        return Member(key=key, shape=tuple(shape), dtype=dtype, fortran=bool(fortran), nbytes=nbytes)

    def read(self, key: str) -> np.ndarray:
        """The array ``key``, read into an array of its declared shape (never more bytes than that)."""
        member = self.members[key]
        array = np.empty(member.shape[::-1] if member.fortran else member.shape, member.dtype)
        view = memoryview(array.reshape(-1).view(np.uint8))
        try:
            with self._zip.open(self._infos[key]) as stream:
                _read_header(stream)
                for start in range(0, member.nbytes, 1 << 20):
                    chunk = stream.read(min(1 << 20, member.nbytes - start))
                    if len(chunk) != min(1 << 20, member.nbytes - start):
                        raise EOFError("the array data ends early")
                    view[start:start + len(chunk)] = chunk
        except ZIP_ERRORS as exc:
            raise NpzError(f"{self.what}: member {key!r}: {_reason(exc)}") from None
        return array.T if member.fortran else array

    def arrays(self) -> Iterator[tuple[str, np.ndarray]]:
        for key in self.members:
            yield key, self.read(key)


def _read_header(stream) -> tuple:
    """(shape, fortran order, dtype) of a ``.npy`` stream, leaving it at the first data byte."""
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(stream, max_header_size=MAX_HEADER)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(stream, max_header_size=MAX_HEADER)
    raise ValueError(f"npy format version {version} (vkdiff reads 1.0 and 2.0)")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def read_npz(source: bytes | Path, what: str, *, budget: int | None = None) -> dict[str, np.ndarray]:
    """Every array of the archive, after every header was checked against the budget.

    Raises:
        NpzError: not an archive of plain arrays, a member whose data does not match its header.
        BudgetError: the arrays together are over the host memory budget.
    """
    with NpzReader(source, what, budget=budget) as npz:
        return dict(npz.arrays())
