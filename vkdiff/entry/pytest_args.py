"""``--et-src PATH`` in two words under pytest: keep the tree from becoming pytest's root.

pytest decides its root directory and ini file from the path-like arguments *before* it
loads plugins from entry points, so at that moment it does not know that ``PATH`` is the
value of ``--et-src`` (or ``--vkdiff-report DIR``): an existing ``PATH`` moves the root (and
``.pytest_cache``, the ini file, the default results folder) into the ExecuTorch checkout.

Once vkdiff's options are known, ``restart_if_root_moved`` compares the root pytest chose
with the root of the same command line written with ``--option=value``. When they differ,
a command-line pytest is restarted with that spelling (nothing has been written yet); a
pytest run in-process (``pytest.main``) cannot be, and stops with one usage line.
"""

from __future__ import annotations

import copy
import os
import sys
from typing import Sequence

import pytest

VALUE_OPTIONS = ("--et-src", "--vkdiff-device", "--vkdiff-cases", "--vkdiff-repeat", "--vkdiff-seed",
                 "--vkdiff-suite", "--vkdiff-report")
"""vkdiff's pytest options that take a value."""
RESTARTED_ENV = "VKDIFF_PYTEST_RESTARTED"


def joined(args: Sequence[str]) -> list[str]:
    """``args`` with every ``--option value`` of vkdiff's written ``--option=value``.

    Example::

        >>> joined(["-q", "--et-src", "/src/executorch", "--vkdiff"])
        ['-q', '--et-src=/src/executorch', '--vkdiff']
    """
    out, items = [], list(args)
    index = 0
    while index < len(items):
        item = items[index]
        if item in VALUE_OPTIONS and index + 1 < len(items):
            out.append(f"{item}={items[index + 1]}")
            index += 2
            continue
        out.append(item)
        index += 1
    return out


def _setup(config, args: list[str]):
    """(rootpath, inipath) pytest would choose for ``args`` (the option values already known)."""
    from _pytest.config.findpaths import determine_setup

    namespace = config._parser.parse_known_args(args, namespace=copy.copy(config.option))
    rootpath, inipath, _, _ = determine_setup(inifile=namespace.inifilename, override_ini=namespace.override_ini,
                                              args=namespace.file_or_dir, rootdir_cmd_arg=namespace.rootdir or None,
                                              invocation_dir=config.invocation_params.dir)
    return rootpath, inipath


def restart_if_root_moved(config) -> None:
    """Restart pytest with ``--option=value`` when a two-word option value moved its root (see the module).

    Raises:
        pytest.UsageError: the root moved in a pytest that cannot be restarted (run in-process).
    """
    given = list(config.invocation_params.args)
    fixed = joined(given)
    if fixed == given or os.environ.get(RESTARTED_ENV):
        return
    wanted = _setup(config, fixed)
    if wanted == (config.rootpath, config.inipath):
        return
    option = next(a for a in given if a in VALUE_OPTIONS and f"{a}=" not in " ".join(given))
    if sys.argv[1:] != given or not getattr(sys, "orig_argv", None):
        raise pytest.UsageError(f"{option} VALUE in two words made pytest take VALUE as its root directory "
                                f"({config.rootpath}); write {option}=VALUE")
    prefix = sys.orig_argv[: len(sys.orig_argv) - len(given)]
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:  # pytest already points fd 1 and 2 at its capture files
        capture.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[RESTARTED_ENV] = "1"
    os.execv(sys.executable, [sys.executable, *prefix[1:], *fixed])
