"""How much host memory one input may make vkdiff spend, checked before anything is allocated.

A file from elsewhere declares sizes (a ``.pte``'s tensors, an ``.npz`` member's header,
a zip entry's uncompressed length) that cost nothing to write and gigabytes to honour.
Every such size is compared with this budget first; going over it is one line naming
the thing and its size. The budget is half the machine's memory (the smaller of the
physical memory and the cgroup's limit), so a refusal does not depend on what else
happens to run; ``$VKDIFF_MEMORY_BUDGET`` (bytes, or ``512M``, ``8G``) sets it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

BUDGET_ENV = "VKDIFF_MEMORY_BUDGET"
CGROUP_LIMITS = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class BudgetError(ValueError):
    """A declared size over the host memory budget (one line: what, how large, the budget, how to change it)."""


def human(nbytes: int | float) -> str:
    """``6.4 GB``-style size for messages.

    Example::

        >>> human(6 * 2**30)
        '6.4 GB'
    """
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} B"


def parse_size(text: str) -> int:
    """``8G`` → 8589934592.

    Raises:
        BudgetError: not a size (names ``$VKDIFF_MEMORY_BUDGET``), so every caller shows it as its one line.
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if found is None or float(found.group(1)) <= 0:
        raise BudgetError(f"{BUDGET_ENV}={text!r}: give a size in bytes, or with a unit (512M, 8G)")
    return int(float(found.group(1)) * _UNITS[found.group(2).upper()])


def machine_memory() -> int:
    """Physical memory, or the cgroup's limit when that is smaller."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in CGROUP_LIMITS:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def host_budget() -> int:
    """Bytes one input may make vkdiff hold: ``$VKDIFF_MEMORY_BUDGET``, else half the machine's memory."""
    given = os.environ.get(BUDGET_ENV, "").strip()
    return parse_size(given) if given else machine_memory() // 2


def check_budget(nbytes: int, what: str, *, budget: int | None = None) -> None:
    """Refuse ``what`` when it would take more than the budget.

    Raises:
        BudgetError: ``nbytes`` is over the budget (the message names ``what``).
    """
    limit = host_budget() if budget is None else budget
    if nbytes > limit:
        source = "as given" if budget is not None else f"{BUDGET_ENV}" if os.environ.get(BUDGET_ENV, "").strip() \
            else f"half this machine's memory; set {BUDGET_ENV} to change it"
        raise BudgetError(f"{what}: needs {human(nbytes)} of host memory, over vkdiff's budget of {human(limit)} "
                          f"({source})")
