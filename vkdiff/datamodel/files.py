"""Files from elsewhere read as data: regular files only, their size checked before a byte is read.

A FIFO or a device named in an artifacts manifest would block the reader forever, and
a file's size is the one bound on what reading it costs; both are known from ``fstat``
on the opened descriptor (opened without blocking, so the check and the read are of
the same file).
"""

from __future__ import annotations

import os
import stat

from vkdiff.datamodel.budget import check_budget


class NotRegularError(ValueError):
    """The path is not a regular file (a FIFO, a device, a folder), or cannot be opened."""


def read_regular(path: str | os.PathLike, what: str, *, budget: int | None = None) -> bytes:
    """The bytes of ``path`` when it is a regular file that fits the host memory budget.

    Raises:
        NotRegularError: missing, unreadable or not a regular file (names ``what``).
        BudgetError: larger than the budget.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise NotRegularError(f"{what}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularError(f"{what}: not a regular file")
        check_budget(info.st_size, what, budget=budget)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(info.st_size)
    finally:
        os.close(fd)
