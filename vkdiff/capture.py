"""What native libraries print on file descriptor 2, captured so vkdiff's own output stays readable.

A leaf room: Mesa's ``XDG_RUNTIME_DIR`` line, ExecuTorch's C++ runtime log (``No temp
allocator provided``), torchao's ``Failed to load`` lines land on fd 2 from native code;
vkdiff keeps them and shows them only where they explain a failure (or with ``-v``).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import logging
import os
import sys
import tempfile
import warnings
from typing import Iterator


@contextlib.contextmanager
def quiet_stderr() -> Iterator[list[str]]:
    """Collect what native code writes on file descriptor 2 (Mesa's XDG_RUNTIME_DIR noise).

    Yields a list that receives the captured lines that are not known noise.
    """
    captured: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            captured += [ln for ln in text.splitlines() if ln.strip() and "XDG_RUNTIME_DIR" not in ln]


@contextlib.contextmanager
def capture_fd2() -> Iterator[list[str]]:
    """Redirect file descriptor 2, and ``sys.stderr`` onto it, to a temporary file; the list gets its lines on exit.

    The C++ runtime's log reaches fd 2 two ways: C/C++ code writes to it directly, and the
    ExecuTorch pybindings print ``ET_LOG`` messages through Python's ``sys.stderr`` (which
    pytest, for one, replaces). Pointing ``sys.stderr`` at fd 2 for the duration keeps both
    in one stream, in order.

    Example::

        >>> with capture_fd2() as lines:
        ...     _ = os.write(2, b"[XNNCompiler.cpp:1] boom\\n")
        ...     print("[method.cpp:2] via sys.stderr", file=sys.stderr)
        >>> lines
        ['[XNNCompiler.cpp:1] boom', '[method.cpp:2] via sys.stderr']
    """
    lines: list[str] = []
    python_stderr = sys.stderr
    with contextlib.suppress(Exception):
        python_stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace",
                                      write_through=True)
        try:
            yield lines
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            sys.stderr = python_stderr
            _flush_c_stdio()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode(errors="replace").splitlines())


def _flush_c_stdio() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def quiet_libraries() -> Iterator[list[str]]:
    """Keep torch/torchao/executorch chatter (warnings, INFO logs, native fd-2 prints) out of vkdiff's output.

    Yields the list of captured native stderr lines (kept for diagnostics).
    """
    with quiet_stderr() as captured, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        previous = logging.root.manager.disable
        logging.disable(logging.INFO)
        try:
            yield captured
        finally:
            logging.disable(previous)
