"""The catalogue's model case ids as data, so a kernel-only ``--cases`` pattern is answered without importing torch.

``model_ids.txt`` lists every id ``catalog.all_model_cases()`` yields, one per line;
``tests/cases/test_model_ids.py`` fails when the two differ (regenerate the file as
that test's message says).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

IDS_FILE = Path(__file__).with_name("model_ids.txt")


@functools.lru_cache(maxsize=1)
def model_ids() -> tuple[str, ...]:
    return tuple(line for line in IDS_FILE.read_text().splitlines() if line.strip())


def matches_a_model_case(pattern: str | None) -> bool:
    """Whether the ``--cases`` regex (searched, as ``all_model_cases`` does) can select a model case."""
    regex = re.compile(pattern) if pattern else None
    return any(regex is None or regex.search(case_id) for case_id in model_ids())
