"""The loop ``vkdiff check`` and ``vkdiff.check`` share: host results recorded, then every case on its devices."""

from __future__ import annotations

from typing import Callable, Sequence

from vkdiff.datamodel import Result


def run_cases(cases: Sequence, host: Sequence[Result], runner, store, *,
              on_result: Callable[[Result], None] | None = None, stop: Callable[[], bool] = lambda: False,
              wrap: Callable | None = None) -> list[Result]:
    """Append ``host`` and every device result of ``cases`` to ``store`` as they come (``on_result`` sees each);
    ``stop`` ends the loop between results; ``wrap(fn, *args)`` runs each case (the CLI keeps library noise out)."""
    found: list[Result] = []

    def keep(result: Result) -> None:
        store.append(result)
        found.append(result)
        if on_result is not None:
            on_result(result)

    for result in host:
        keep(result)
    try:
        for case in cases:
            for device in runner.devices_for(case):
                if stop():
                    return found
                for result in (wrap or (lambda fn, *a: fn(*a)))(runner.run, case, device):
                    keep(result)
    finally:
        runner.close()
    return found
