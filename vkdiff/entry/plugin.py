"""pytest plugin: cases × variants × devices as test items, streamed results, per-device reports.

Enabled with ``--vkdiff`` (or any ``--vkdiff-*`` selection, or ``vkdiff = true`` in the ini file).
Kernel cases become ``linear_q4gsw[M13-K256-N40-g32-fp16-buffer]@llvmpipe``, model cases
``llama_proj[8da4w-vulkan]@cpu`` (host checks) and ``@llvmpipe`` (its delegate run node by node). Each process (every xdist worker) owns its wgpu devices and
appends results to its own JSON-lines file; the controller records a crashed worker's item as
``ERROR`` and merges everything at the end (and renders ``--vkdiff-report DIR``).

Loading it twice is harmless: registered under one name (the ``vkdiff`` entry point, or
``-p vkdiff.entry.plugin``), it blocks the other, so its hooks never run twice.
"""

from __future__ import annotations

import sys

import pytest

from vkdiff.entry import hookspec

from vkdiff.entry import pytest_args
from vkdiff.entry.options import add_run_options
from vkdiff.entry.session import SESSION_KEY, VkdiffSession

PLUGIN_NAMES = ("vkdiff", __name__)
"""The entry point's name and the module's: whichever registered this module, the other is blocked."""


def pytest_addhooks(pluginmanager) -> None:
    pluginmanager.add_hookspecs(hookspec)
    registered = pluginmanager.get_name(sys.modules[__name__])
    for name in PLUGIN_NAMES:
        if name != registered:
            pluginmanager.set_blocked(name)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args) -> None:
    """``--et-src PATH`` in two words must not make PATH pytest's root (see ``pytest_args``)."""
    pytest_args.restart_if_root_moved(early_config)


def pytest_addoption(parser) -> None:
    group = parser.getgroup("vkdiff", "vkdiff: differential tests of ExecuTorch's Vulkan backend")
    group.addoption("--vkdiff", action="store_true", default=False, help="Collect vkdiff cases as test items")
    add_run_options(group.addoption, prefix="vkdiff-")
    group.addoption("--vkdiff-suite", choices=("all", "kernels", "models", "user"), default="all",
                    help="Kernel cases, model cases, both with the user's own (all), or only the cases conftest "
                         "files declare with pytest_vkdiff_cases (user)")
    group.addoption("--vkdiff-report", metavar="DIR", default=None,
                    help="Write merged results and per-device HTML reports to DIR")
    parser.addini("vkdiff", type="bool", default=False, help="Collect vkdiff cases without --vkdiff")
    parser.addini("vkdiff_sample", type="string", default="0",
                  help="--vkdiff-sample when not given: a seeded sample of each op's cases of at least N (0: every case)")


def _enabled(config) -> bool:
    """Explicit ``--vkdiff``/selection flags always; the ini switch only for whole runs (no test paths named)."""
    opt = config.option
    if opt.vkdiff or opt.vkdiff_cases or opt.vkdiff_device:
        return True
    whole_run = config.args_source is not pytest.Config.ArgsSource.ARGS
    return whole_run and bool(config.getini("vkdiff") or opt.vkdiff_report)


@pytest.hookimpl(trylast=True)
def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "vkdiff_kernel: an ET-VK kernel case on a Vulkan device")
    config.addinivalue_line("markers", "vkdiff_model: a model case: host checks, or its delegate on a device")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(), "vkdiff-xdist")
    if not _enabled(config):
        return
    session = VkdiffSession.from_config(config)
    config.stash[SESSION_KEY] = session
    for slug in session.device_slugs() + ["cpu", "none"]:
        config.addinivalue_line("markers", f"device_{slug.replace('-', '_')}: runs on Vulkan adapter {slug}")


def pytest_sessionstart(session) -> None:
    """Controller (or single process), unless only collecting: choose the tree, start a fresh results folder."""
    vk = session.config.stash.get(SESSION_KEY, None)
    if vk is not None and not vk.is_worker and not session.config.option.collectonly:
        vk.start()


def pytest_report_header(config) -> list[str]:
    """One line: which ExecuTorch tree the session runs (or why none, and how to give one)."""
    vk = config.stash.get(SESSION_KEY, None)
    if vk is None or vk.tree is None:
        return []
    sample = ([f"vkdiff: a seeded sample of each op's cases (at least {vk.sample}, every knob and edge flag; "
               f"foundation suites whole); 'vkdiff run' runs every case"] if vk.sample else [])
    return [f"vkdiff: {vk.tree.note}", *sample]


class XdistHooks:
    """Hooks that exist only while pytest-xdist is loaded (``-p no:xdist`` must still work)."""

    @staticmethod
    def pytest_configure_node(node) -> None:
        """xdist controller → worker: every worker writes into the controller's results folder."""
        session = node.config.stash.get(SESSION_KEY, None)
        if session is not None:
            node.workerinput.update(session.worker_input())

    @staticmethod
    def pytest_handlecrashitem(crashitem, report, sched) -> None:
        """A worker died inside ``crashitem``: record it as ERROR with the crash text (nothing else is lost)."""
        session = report.node.config.stash.get(SESSION_KEY, None) if hasattr(report, "node") else None
        if session is not None:
            session.record_crash(crashitem, str(report.longrepr))


def pytest_collection_modifyitems(session, config, items) -> None:
    vk = config.stash.get(SESSION_KEY, None)
    if vk is not None:
        items.extend(vk.make_items(session))


@pytest.hookimpl(trylast=True)
def pytest_vkdiff_run_item(item, session):
    return session.run(item)


def pytest_sessionfinish(session, exitstatus) -> None:
    """Controller (or single process): merge every process's results and render the reports."""
    vk = session.config.stash.get(SESSION_KEY, None)
    if vk is not None and not vk.is_worker and not session.config.option.collectonly:
        vk.merged = vk.merge()
        if vk.merged.nothing_ran and not vk.allow_empty and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    vk = config.stash.get(SESSION_KEY, None)
    merged = getattr(vk, "merged", None)
    if merged is not None:
        terminalreporter.write_sep("-", "vkdiff")
        terminalreporter.write_line(f"{merged.count} results in {merged.path}")
        for line in merged.unreadable.splitlines():
            terminalreporter.write_line(line, yellow=True)
        if merged.repaired:
            terminalreporter.write_line(f"{merged.repaired} results used cache entries that were corrupt and rebuilt "
                                        f"(flag cache-repaired)", yellow=True)
        if merged.nothing_ran:
            advice = "" if vk.allow_empty else "; the session fails (pass --vkdiff-allow-empty if that is intended)"
            terminalreporter.write_line(f"warning: {merged.nothing_ran}{advice}", red=True)
        for page in merged.pages:
            terminalreporter.write_line(f"report: {page}")
