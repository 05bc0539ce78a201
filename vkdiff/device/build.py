"""Build ET-VK shader variants: ExecuTorch tree → executorch's own codegen → glslc → cached SPIR-V.

The tree is a user's ExecuTorch tree (``vkdiff.device.trees``); vkdiff never ships one. Variants are expanded with ExecuTorch's own ``SPVGenerator`` (with
``replace_u16vecn``): the tree's ``gen_vulkan_spv.py`` when it has one, so templates and
codegen always match (older and newer trees, bisects), else the installed wheel's. They
are compiled with ET-VK's glslc flags and cached on disk under ``$VKDIFF_CACHE_DIR`` (default ``~/.cache/vkdiff``) keyed by a hash of (generated
source and headers, flags, glslc version). An index keyed by (tree hash, variant)
lets a machine without glslc or executorch (a lent GPU runner) reuse the cache.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from vkdiff.device.trees import GLSL_SUBDIR
from vkdiff.datamodel import (CACHE_ENV, CacheCorruptError, cache_dir, cached_folder, read_entry,
                                      record_repair, write_entry)

BASE_FLAGS = ("-fshader-stage=compute", "-Werror")
DOT_EXT = "GL_EXT_integer_dot_product"
_EXT_LINE = re.compile(rf"^\s*#extension\s+{DOT_EXT}\s*:\s*\w+\s*$", re.MULTILINE)
_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"', re.MULTILINE)

DOT_POLYFILL = """
// vkdiff polyfill: exact (saturating) emulation of GL_EXT_integer_dot_product's
// dotPacked4x8AccSatEXT for glslc builds that lack the extension.
int dotPacked4x8AccSatEXT(const int a, const int b, const int acc) {
  const ivec4 va = (ivec4(a) << ivec4(24, 16, 8, 0)) >> 24;
  const ivec4 vb = (ivec4(b) << ivec4(24, 16, 8, 0)) >> 24;
  const int s = va.x * vb.x + va.y * vb.y + va.z * vb.z + va.w * vb.w;
  if (s > 0 && acc > 2147483647 - s) return 2147483647;
  if (s < 0 && acc < (-2147483647 - 1) - s) return -2147483647 - 1;
  return acc + s;
}
"""


class BuildError(RuntimeError):
    """Codegen or glslc failed for one variant (→ ``BUILD_FAIL``)."""


class GlslcMissingError(BuildError):
    """glslc is not installed."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class BuiltShader:
    """A compiled ET-VK variant."""

    name: str
    """Variant name as ET-VK dispatches it (e.g. ``linear_q4gsw_tiled_buffer_buffer_float``)."""
    spv: bytes
    """SPIR-V binary."""
    polyfilled: bool
    """True when ``dotPacked4x8AccSatEXT`` was emulated (glslc lacked the extension)."""
    flags: tuple[str, ...]
    """glslc flags that produced it."""


@functools.lru_cache(maxsize=None)
def glslc_version() -> str:
    """First line of ``glslc --version``.

    Raises:
        GlslcMissingError: glslc is not on PATH (names the Debian package).
    """
    exe = shutil.which("glslc")
    if exe is None:
        raise GlslcMissingError("glslc not found: install Debian package 'glslc' (apt-get install glslc)")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    return " ".join(out.split("\n")[:3]).strip()


@functools.lru_cache(maxsize=None)
def glslc_has_dot_product() -> bool:
    """Whether glslc accepts ``GL_EXT_integer_dot_product`` (needs glslang ≥ 15.2)."""
    probe = "#version 450\n#extension GL_EXT_integer_dot_product : require\n" \
            "layout(set=0,binding=0) buffer B { int v[]; };\nvoid main(){ v[0] = dotPacked4x8AccSatEXT(v[1], v[2], v[3]); }\n"
    glslc_version()
    with tempfile.TemporaryDirectory(prefix="vkdiff-probe-") as tmp:
        src = Path(tmp, "probe.comp")
        src.write_text(probe)
        done = subprocess.run(["glslc", *BASE_FLAGS, "--target-env=vulkan1.1", str(src), "-o", str(Path(tmp, "p.spv"))],
                              capture_output=True, text=True)
    return done.returncode == 0


def tree_hash(glsl_dir: Path) -> str:
    """Hash of every shader template and yaml in the tree (names and contents)."""
    digest = hashlib.sha256()
    for path in sorted(glsl_dir.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(glsl_dir)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def _sha(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()


SIMILAR_ENOUGH = 0.7
"""``difflib`` ratio above which a template line is taken as the source of a generated one (``${...}`` expanded)."""


def template_line(generated: str, template: str, line: int) -> tuple[int, bool] | None:
    """The line of ``template`` that produced line ``line`` (1-based) of ``generated``: (number, exact).

    ET-VK's codegen expands ``$``-directives and ``${...}`` calls, so line numbers shift; the
    generated line is found in the template by its text (the first identical line, else the
    most similar one when it is close enough, marked inexact).

    Example::

        >>> template_line("#version 450\\n// a\\n// b\\n// c\\nx = 1;", "#version 450\\n$for i in 'abc':\\n  // ${i}\\nx = 1;", 5)
        (4, True)
    """
    lines = generated.splitlines()
    if not 1 <= line <= len(lines) or not lines[line - 1].strip():
        return None
    wanted = lines[line - 1].strip()
    candidates = [t.strip() for t in template.splitlines()]
    if wanted in candidates:
        return candidates.index(wanted) + 1, True
    scores = [difflib.SequenceMatcher(None, wanted, text).ratio() for text in candidates]
    best = max(range(len(scores)), key=scores.__getitem__, default=None)
    return (best + 1, False) if best is not None and scores[best] >= SIMILAR_ENOUGH else None


def _pack(flags: tuple[str, ...], spv: bytes) -> bytes:
    """A SPIR-V cache payload: the glslc flags that made it (one JSON line), then the module."""
    return json.dumps(list(flags)).encode() + b"\n" + spv


def _unpack(payload: bytes) -> tuple[bytes, tuple[str, ...]]:
    head, _, spv = payload.partition(b"\n")
    return spv, tuple(json.loads(head))


CODEGEN_IN_TREE = Path("backends/vulkan/runtime/gen_vulkan_spv.py")


def codegen_path(et_src: Path) -> Path:
    """The tree's own ``gen_vulkan_spv.py`` (its templates match it), else the installed executorch's.

    Raises:
        BuildError: neither exists.
    """
    in_tree = et_src / CODEGEN_IN_TREE
    if in_tree.exists():
        return in_tree
    spec = importlib.util.find_spec("executorch")
    wheel = Path(spec.submodule_search_locations[0], "backends/vulkan/runtime/gen_vulkan_spv.py") if spec else None
    if wheel is None or not wheel.exists():
        raise BuildError(f"no gen_vulkan_spv.py in {et_src} and executorch is not installed; install "
                         f"executorch==1.5.1 or point {CACHE_ENV} at a prebuilt cache")
    return wheel


@functools.lru_cache(maxsize=None)
def _load_codegen(path: Path):
    """Load a ``gen_vulkan_spv`` module by path (importing the executorch package itself costs seconds)."""
    name = "vkdiff_et_gen_vulkan_spv_" + _sha(str(path))[:12]
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


class ShaderBuilder:
    """Builds and caches the variants of one ExecuTorch tree."""

    def __init__(self, et_src: Path, cache: Path | None = None):
        self.et_src = et_src
        self.glsl_dir = et_src / GLSL_SUBDIR
        self.tree = tree_hash(self.glsl_dir)
        self.cache = cache or cache_dir()
        self.index_dir = self.cache / "index" / self.tree

    @functools.cached_property
    def _codegen(self):
        """executorch's own generator module and an ``SPVGenerator`` for this tree."""
        gen = _load_codegen(codegen_path(self.et_src))
        env = {**copy.deepcopy(gen.DEFAULT_ENV), **gen.TYPE_MAPPINGS, **gen.UTILITY_FNS}
        return gen, gen.SPVGenerator(str(self.glsl_dir), env, None, replace_u16vecn=True)

    def has_prebuilt(self) -> bool:
        """Whether the cache already holds variants of this tree (a GPU runner without glslc needs them)."""
        return any(self.index_dir.glob("*.json"))

    def variants(self) -> frozenset[str]:
        """Every shader variant name the tree defines (or, without executorch, that the cache holds)."""
        try:
            _, generator = self._codegen
        except BuildError:
            return frozenset(p.stem for p in self.index_dir.glob("*.json"))
        return frozenset(n for n, (path, _) in generator.output_file_map.items() if path.endswith(".glsl"))

    def templates(self) -> dict[str, str]:
        """Variant name → the template file (``.glsl``) it is generated from (needs executorch's codegen)."""
        _, generator = self._codegen
        return {name: Path(path).name for name, (path, _) in generator.output_file_map.items()
                if path.endswith(".glsl")}

    @functools.cached_property
    def _polyfill(self) -> bool:
        return not glslc_has_dot_product()

    def _generate(self, name: str) -> str:
        gen, generator = self._codegen
        if name not in generator.output_file_map:
            raise BuildError(f"{name}: no such shader variant in {self.glsl_dir}")
        template, params = generator.output_file_map[name]
        text = Path(template).read_text(encoding="utf-8")
        return gen.preprocess(generator.maybe_replace_u16vecn(text), copy.deepcopy(params), name)

    def binding_names(self, name: str) -> dict[int, str]:
        """Binding number → variable name as the variant's generated GLSL declares it (glslc -O drops names)."""
        source = self._generate(name)
        found = re.finditer(r"layout\([^)]*\bbinding\s*=\s*(\d+)[^)]*\)[^;{]*?(\w+)\s*(?:;|\{)", source)
        names = {int(m.group(1)): m.group(2) for m in found}
        for block in re.finditer(r"layout\([^)]*\bbinding\s*=\s*(\d+)[^)]*\)[^;{]*\{[^}]*\}\s*(\w+)\s*;", source):
            names[int(block.group(1))] = block.group(2)
        return names

    @functools.cached_property
    def include_dir(self) -> Path:
        """Generated headers (``.glslh``/``.h``) of this tree, written once per tree, verified when first used."""
        def generate(staging: Path) -> None:
            _, generator = self._codegen
            for name, (template, _) in generator.output_file_map.items():
                if template.endswith(".glsl"):
                    continue
                text = self._generate(name)
                if self._polyfill:
                    text = _EXT_LINE.sub("", text)
                (staging / f"{name}{Path(template).suffix}").write_text(text, encoding="utf-8")

        return cached_folder(self.cache / "include" / (self.tree + ("-poly" if self._polyfill else "")), generate)

    @functools.cached_property
    def _headers_hash(self) -> str:
        return _sha(*sorted(p.name + p.read_text(encoding="utf-8") for p in self.include_dir.iterdir()
                            if p.is_file() and not p.name.startswith(".")))

    def _uses_dot_ext(self, text: str, seen: set[str] | None = None) -> bool:
        """Whether ``text`` or a header it includes (as templates, before stripping) needs the dot extension."""
        seen = set() if seen is None else seen
        if _EXT_LINE.search(text):
            return True
        for inc in set(_INCLUDE.findall(text)) - seen:
            seen.add(inc)
            template = self.glsl_dir / inc
            if template.exists() and self._uses_dot_ext(template.read_text(encoding="utf-8"), seen):
                return True
        return False

    def build(self, name: str) -> BuiltShader:
        """Compile one variant (cached; a corrupt cache entry is discarded, rebuilt and recorded as a repair).

        Raises:
            BuildError: codegen or glslc failed; the message holds the compiler's first lines (and the
                repaired entry, when a corrupt one could not be rebuilt here).
        """
        index = self.index_dir / f"{name}.json"
        try:
            entry = json.loads(read_entry(index))
            spv, flags = _unpack(read_entry(self.cache / "spv" / f"{entry['key']}.spv"))
            return BuiltShader(name=name, spv=spv, polyfilled=entry["polyfilled"], flags=flags)
        except FileNotFoundError:
            repaired = None
        except (CacheCorruptError, ValueError, KeyError) as exc:
            repaired = exc if isinstance(exc, CacheCorruptError) else CacheCorruptError(index, f"bad record: {exc}")
            self._discard(repaired)
        try:
            return self._build_fresh(name, index)
        except BuildError as exc:
            if repaired is not None:
                raise BuildError(f"{exc} (rebuilding corrupt cache entry {repaired.path}: {repaired.why})") from None
            raise

    def _discard(self, error: CacheCorruptError) -> None:
        record_repair(error)
        error.path.unlink(missing_ok=True)

    def _build_fresh(self, name: str, index: Path) -> BuiltShader:
        try:
            source = self._generate(name)
        except BuildError:
            raise
        except Exception as exc:  # executorch's codegen raises anything from exec()
            raise BuildError(f"{name}: codegen failed: {type(exc).__name__}: {exc}") from None
        polyfilled = self._polyfill and self._uses_dot_ext(source)
        if polyfilled:
            source = _EXT_LINE.sub("", source)
            source = re.sub(r"^(#version[^\n]*\n)", lambda m: m.group(1) + DOT_POLYFILL, source, count=1, flags=re.M)
        _, generator = self._codegen
        vk_version = str(generator.output_file_map[name][1].get("VK_VERSION", "1.1"))
        flags = (*BASE_FLAGS, f"--target-env=vulkan{vk_version}")
        key = _sha(source, self._headers_hash, " ".join(flags), glslc_version())
        spv_path = self.cache / "spv" / f"{key}.spv"
        try:
            spv, used = _unpack(read_entry(spv_path))
        except FileNotFoundError:
            spv, used = self._compile_and_store(name, source, flags, spv_path)
        except CacheCorruptError as exc:
            self._discard(exc)
            spv, used = self._compile_and_store(name, source, flags, spv_path)
        write_entry(index, json.dumps({"key": key, "polyfilled": polyfilled, "glslc": glslc_version()}).encode())
        return BuiltShader(name=name, spv=spv, polyfilled=polyfilled, flags=used)

    def _compile_and_store(self, name: str, source: str, flags: tuple[str, ...],
                           spv_path: Path) -> tuple[bytes, tuple[str, ...]]:
        spv, used = self._compile(name, source, flags)
        write_entry(spv_path, _pack(used, spv))
        return spv, used

    def _compile(self, name: str, source: str, flags: tuple[str, ...]) -> tuple[bytes, tuple[str, ...]]:
        """glslc with ``-O``, retried without it (as ET-VK's build does)."""
        with tempfile.TemporaryDirectory(prefix="vkdiff-glslc-") as tmp:
            src, out = Path(tmp, f"{name}.glsl"), Path(tmp, f"{name}.spv")
            src.write_text(source, encoding="utf-8")
            errors = ""
            for extra in (("-O",), ()):
                used = flags + extra
                done = subprocess.run(["glslc", *used, "-I", str(self.include_dir), str(src), "-o", str(out)],
                                      capture_output=True, text=True)
                if done.returncode == 0:
                    return out.read_bytes(), used
                errors = done.stderr.strip() or done.stdout.strip()
        lines = [self._locate(name, source, ln.replace(str(src), name)) for ln in errors.splitlines() if ln.strip()]
        raise BuildError(f"{name}: glslc failed: " + " | ".join(lines[:4]))

    def _locate(self, name: str, source: str, line: str) -> str:
        """Add the tree's template line to a glslc message about line N of the generated variant."""
        found = re.match(rf"^{re.escape(name)}:(\d+):", line)
        if found is None:
            return line
        template = Path(self._codegen[1].output_file_map[name][0])
        where = template_line(source, template.read_text(encoding="utf-8"), int(found.group(1)))
        if where is None:
            return line
        number, exact = where
        place = f"{template.relative_to(self.et_src)}:{number}" if template.is_relative_to(self.et_src) else \
            f"{template.name}:{number}"
        return line.replace(found.group(0), f"{found.group(0)} (template {'' if exact else '~'}{place})", 1)
