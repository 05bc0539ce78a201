"""Where the flatbuffer schemas a program is read by come from: the user's tree, saved artifacts, or executorch.

A runner without executorch still reads programs: ``vkdiff check`` names the user's
ExecuTorch tree (``--et-src``) or an artifacts folder as a schema root, and each root
holds the schemas at the paths the ExecuTorch repository uses. The installed executorch
package has the same layout and comes last. Roots travel in ``VKDIFF_SCHEMA_PATH`` so
that the child processes a run isolates work in read the same schemas.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

from vkdiff.program.flatbuffers import Schema, parse_schema

PROGRAM = ("schema/program.fbs", "schema/scalar_type.fbs")
"""The ``Program`` schema and the file it includes."""
VK_GRAPH = ("backends/vulkan/serialization/schema.fbs",)
"""The Vulkan delegate's ``VkGraph`` schema."""
ENV = "VKDIFF_SCHEMA_PATH"


class SchemaMissingError(LookupError):
    """No schema root holds a file that reading the program needs."""


def add_root(path: Path) -> None:
    """Search ``path`` (a tree or an artifacts folder) before the roots already named, in this process and its
    children."""
    roots = [str(Path(path).resolve())] + [r for r in os.environ.get(ENV, "").split(os.pathsep) if r]
    os.environ[ENV] = os.pathsep.join(dict.fromkeys(roots))


def roots() -> list[Path]:
    """Schema roots in search order: those named (``add_root``, ``VKDIFF_SCHEMA_PATH``), then executorch's."""
    named = [Path(r) for r in os.environ.get(ENV, "").split(os.pathsep) if r]
    spec = importlib.util.find_spec("executorch")
    package = [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
    return named + package


def locate(files: tuple[str, ...]) -> list[Path]:
    """The files of one schema from the first root that holds all of them.

    Raises:
        SchemaMissingError: no root holds them (the message says what to pass).
    """
    for root in roots():
        paths = [root / f for f in files]
        if all(p.is_file() for p in paths):
            return paths
    raise SchemaMissingError(f"reading this program needs {files[0]}: pass the ExecuTorch tree it was built with "
                             f"(--et-src TREE) or check an artifacts folder saved with --save-artifacts")


def load(files: tuple[str, ...]) -> Schema:
    """The parsed schema of ``files`` (includes concatenated), cached by the files' contents."""
    return _parse(tuple(p.read_text() for p in locate(files)))


@functools.lru_cache(maxsize=8)
def _parse(texts: tuple[str, ...]) -> Schema:
    return parse_schema("\n".join(texts))
