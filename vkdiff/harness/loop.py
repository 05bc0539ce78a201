"""The one case × device loop: ``vkdiff run``, ``vkdiff check`` and ``vkdiff.check`` drive their cases through it."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from vkdiff.datamodel import Result


def run_cases(cases: Sequence, host: Sequence[Result], runner, store, *,
              on_result: Callable[[Result], None] | None = None, stop: Callable[[], bool] = lambda: False,
              wrap: Callable | None = None, before: Callable[[Any], None] | None = None,
              after: Callable[[Any], None] | None = None, jobs: int = 1) -> list[Result]:
    """Append ``host`` and every device result of ``cases`` to ``store`` as they come (``on_result`` sees each).

    ``stop`` ends the loop between results; ``wrap(fn, *args)`` runs each case on a device (the CLI keeps library
    noise out); ``before(case)`` and ``after(case)`` run around each case's devices (saving artifacts, progress).
    With ``jobs`` above 1 the kernel cases run first, over that many worker processes (``harness.parallel``).
    The runner is closed at the end, however the loop ends.
    """
    found: list[Result] = []

    def keep(result: Result) -> None:
        store.append(result)
        found.append(result)
        if on_result is not None:
            on_result(result)

    for result in host:
        keep(result)
    try:
        if jobs > 1:
            from vkdiff.cases.kernels import KernelCase
            from vkdiff.harness.parallel import run_parallel

            for result in run_parallel([c for c in cases if isinstance(c, KernelCase)], runner, jobs, stop):
                keep(result)
            cases = [c for c in cases if not isinstance(c, KernelCase)]
        call = wrap or (lambda fn, *a: fn(*a))
        for group in _groups(cases):
            if stop():
                return found
            for case in group:
                if before is not None:
                    before(case)
            if len(group) > 1:
                for result in call(runner.run_window, group):
                    keep(result)
            else:
                for device in runner.devices_for(group[0]):
                    if stop():
                        return found
                    for result in call(runner.run, group[0], device):
                        keep(result)
            for case in group:
                if after is not None:
                    after(case)
    finally:
        runner.close()
    return found


def _groups(cases: Sequence) -> Iterator[Sequence]:
    """Runs of up to ``WINDOW`` consecutive kernel cases; every other case alone."""
    from vkdiff.cases.kernels import KernelCase
    from vkdiff.device.runtime.overlap import WINDOW

    start = 0
    while start < len(cases):
        end = start + 1
        if isinstance(cases[start], KernelCase):
            while end < len(cases) and end - start < WINDOW and isinstance(cases[end], KernelCase):
                end += 1
        yield cases[start:end]
        start = end
