"""Build ET-VK shader variants: ExecuTorch tree → executorch's own codegen → glslc → cached SPIR-V.

The tree is a user's ExecuTorch tree (``vkdiff.device.shaders.trees``); vkdiff never ships one. Variants are expanded with ExecuTorch's own ``SPVGenerator`` (with
``replace_u16vecn``): the tree's ``gen_vulkan_spv.py`` when it has one, so templates and
codegen always match (older and newer trees, bisects), else the installed wheel's. They
are compiled with ET-VK's glslc flags and cached on disk under ``$VKDIFF_CACHE_DIR`` (default ``~/.cache/vkdiff``) keyed by a hash of (generated
source and headers, flags, glslc version). An index keyed by (tree hash, variant)
lets a machine without glslc or executorch (a lent GPU runner) reuse the cache.

What the cache can promise: where the codegen runs, an index entry's key is derived again from the
variant's generated source, headers, flags and the glslc version it records, so an index pointed at
another module is a repair, never used; generated headers are compared with the codegen's output. A
module's bytes can only be checked by compiling again: ``vkdiff cache verify --rebuild``.

Each yaml of the tree is parsed on its own, so a broken one is ``BUILD_FAIL`` (naming the file and the
parser's line) for the variants it would define, and the tree's other variants still build.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import hashlib
import importlib.util
import inspect
import json
import re
import shutil
import subprocess
import tempfile
import types
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping

from vkdiff.device.shaders.trees import GLSL_SUBDIR, origin_of
from vkdiff.datamodel import (CACHE_ENV, CacheCorruptError, cache_dir, cached_folder, read_entry,
                                      record_repair, write_entry)
from vkdiff.datamodel.cache import MANIFEST
from vkdiff.device.shaders.derived import Derived

BASE_FLAGS = ("-fshader-stage=compute", "-Werror")
DOT_EXT = "GL_EXT_integer_dot_product"
_EXT_LINE = re.compile(rf"^\s*#extension\s+{DOT_EXT}\s*:\s*\w+\s*$", re.MULTILINE)
_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"', re.MULTILINE)
_KEY = re.compile(r"[0-9a-f]{64}")

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
    """Hash of every shader template and yaml in the tree (names and contents); read again whenever a file's name,
    size or modification time differs from the last reading in this process."""
    files = sorted(path for path in glsl_dir.rglob("*") if path.is_file())
    signature = tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size) for path in files)
    return _tree_hash(glsl_dir, signature)


@functools.lru_cache(maxsize=8)
def _tree_hash(glsl_dir: Path, signature: tuple) -> str:
    digest = hashlib.sha256()
    for name, _, _ in signature:
        digest.update(str(Path(name).relative_to(glsl_dir)).encode())
        digest.update(Path(name).read_bytes())
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


def unpack_module(payload: bytes) -> bytes:
    """The SPIR-V of a module entry's payload (without the flags it was compiled with)."""
    return _unpack(payload)[0]


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
def _load_codegen(path: Path) -> types.ModuleType:
    """Run a ``gen_vulkan_spv`` from its source bytes, never from bytecode beside it, which no check covers (importing
    the executorch package itself costs seconds).

    Raises:
        BuildError: the module raised while loading (names the file).
    """
    module = types.ModuleType("vkdiff_et_gen_vulkan_spv_" + _sha(str(path))[:12])
    module.__file__ = str(path)
    try:
        exec(compile(path.read_bytes(), str(path), "exec", dont_inherit=True), module.__dict__)
    except Exception as exc:  # the tree's code raises anything
        raise BuildError(f"{path}: loading the codegen failed: {type(exc).__name__}: {exc}") from None
    return module


def _per_yaml_generator(gen: types.ModuleType, glsl_dir: Path, env: dict,
                        mediump: bool = False) -> tuple[Any, dict[str, Exception]]:
    """The tree's ``SPVGenerator``, parsing each yaml on its own: a broken one loses only its own templates.

    Returns the generator and, per unreadable yaml file, what its parse raised (its templates are rolled back).

    Raises:
        BuildError: ``mediump`` asked of a tree whose codegen has no ``--auto-use-mediump``.
    """
    if mediump and "auto_use_mediump" not in inspect.signature(gen.SPVGenerator.__init__).parameters:
        raise BuildError(f"{glsl_dir}: this tree's gen_vulkan_spv.py has no --auto-use-mediump (ExecuTorch before "
                         f"3a9230de32): drop --mediump")
    unreadable: dict[str, Exception] = {}

    class PerYaml(gen.SPVGenerator):
        def parseTemplateYaml(self, yaml_file: str) -> None:
            before = set(self.shader_template_params)
            try:
                super().parseTemplateYaml(yaml_file)
                orphans = sorted(set(self.shader_template_params) - before - set(self.src_files))
                if orphans:
                    raise ValueError(f"key {orphans[0]!r} names no template {orphans[0]}.glsl")
            except Exception as exc:  # the tree's codegen raises anything on a bad yaml
                for template in set(self.shader_template_params) - before:
                    del self.shader_template_params[template]
                unreadable[yaml_file] = exc

    extra = {"auto_use_mediump": True} if mediump else {}
    return PerYaml(str(glsl_dir), env, None, replace_u16vecn=True, **extra), unreadable


def _yaml_problem(exc: Exception, where: str) -> str:
    """One line: the yaml file, the parser's line where it gives one, and what went wrong."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        said = ", ".join(str(p) for p in (getattr(exc, "context", None), getattr(exc, "problem", None)) if p)
        return " ".join(f"{where}:{mark.line + 1}: {said}".split())
    said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return " ".join(f"{where}: {said}".split())


def _yaml_claims(yaml_file: Path) -> tuple[set[str], set[str]]:
    """(templates, variant name stems) a yaml names, read from its text, so even one that does not parse says which
    variants it takes down."""
    text = yaml_file.read_text(encoding="utf-8", errors="replace")
    templates = {yaml_file.stem, *re.findall(r"^([A-Za-z_]\w*)\s*:", text, re.MULTILINE)}
    return templates, templates | set(re.findall(r"^[\s-]*NAME\s*:\s*['\"]?(\w+)", text, re.MULTILINE))


def _claimant(name: str, claims: Mapping[str, str]) -> str | None:
    """The problem of the unreadable yaml whose variant stem ``name`` starts with, if any."""
    for stem, problem in claims.items():
        if name == stem or name.startswith(stem + "_"):
            return problem
    return None


class VariantNames(frozenset):
    """The variant names a tree defines. ``in`` also holds for a name an unreadable yaml may define, so a caller that
    asks before building reaches ``build``, whose ``BuildError`` names the yaml (``BUILD_FAIL``), instead of taking
    the variant for absent (``NOT_RUN``)."""

    claims: dict[str, str]
    """Variant name stem → the problem of the unreadable yaml that names it."""

    def __new__(cls, names: Iterable[str], claims: Mapping[str, str] | None = None):
        made = super().__new__(cls, names)
        made.claims = dict(claims or {})
        return made

    def __contains__(self, name: object) -> bool:
        return frozenset.__contains__(self, name) or (
            bool(self.claims) and isinstance(name, str) and _claimant(name, self.claims) is not None)


@dataclasses.dataclass(kw_only=True, frozen=True)
class _Codegen:
    """The tree's codegen, loaded once per builder."""

    module: types.ModuleType
    generator: Any
    """The ``SPVGenerator`` (its ``output_file_map`` without the templates of unreadable yamls)."""
    claims: dict[str, str]
    """Variant name stem → the problem of the unreadable yaml that names it."""
    unreadable: tuple[str, ...]
    """One line per unreadable yaml."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class _Prepared:
    """A variant's source as glslc gets it."""

    source: str
    polyfilled: bool
    flags: tuple[str, ...]


@dataclasses.dataclass(kw_only=True, frozen=True)
class Recheck:
    """What ``vkdiff cache verify --rebuild`` found for one cached variant."""

    name: str
    state: Literal["sound", "corrupt", "not checked"]
    path: Path
    """The cache entry concerned."""
    why: str = ""
    module: bytes = b""
    """The module a fresh compile confirmed (``sound`` only): transformed modules made from it are checked next."""


class ShaderBuilder:
    """Builds and caches the variants of one ExecuTorch tree."""

    def __init__(self, et_src: Path, cache: Path | None = None, mediump: bool = False):
        self.et_src = et_src
        self.glsl_dir = et_src / GLSL_SUBDIR
        self.tree = tree_hash(self.glsl_dir)
        self.cache = cache or cache_dir()
        self.mediump = mediump
        """Half variants as ``EXECUTORCH_VULKAN_USE_MEDIUMP_FOR_FP16`` builds them (``--auto-use-mediump``)."""
        self.index_dir = self.cache / "index" / (self.tree + ("-mediump" if mediump else ""))
        self._headers_of: dict[bool, tuple[dict[str, str], dict[str, str]]] = {}
        self._checked: dict[str, str] = {}
        """Variant → the module key derived for it in this process (each derived once)."""

    @functools.cached_property
    def _loaded(self) -> _Codegen | BuildError:
        """The tree's codegen, or why it cannot load (kept: loading runs the tree's Python, once)."""
        try:
            gen = _load_codegen(codegen_path(self.et_src))
            env = {**copy.deepcopy(gen.DEFAULT_ENV), **gen.TYPE_MAPPINGS, **gen.UTILITY_FNS}
            generator, unreadable = _per_yaml_generator(gen, self.glsl_dir, env, self.mediump)
        except BuildError as exc:
            return exc
        except Exception as exc:  # the tree's codegen raises anything
            return BuildError(f"{self.glsl_dir}: the codegen failed: {type(exc).__name__}: {exc}")
        claims, problems = self._set_aside(generator, unreadable)
        return _Codegen(module=gen, generator=generator, claims=claims, unreadable=problems)

    def _set_aside(self, generator: Any, unreadable: Mapping[str, Exception]) -> tuple[dict[str, str], tuple[str, ...]]:
        """Drop the templates of unreadable yamls from the generator's map (the codegen took them for templates
        without a yaml); returns which variant stems each yaml names and one line per yaml."""
        claims, problems = {}, []
        for yaml_file, exc in sorted(unreadable.items()):
            problems.append(_yaml_problem(exc, self._where(Path(yaml_file))))
            templates, stems = _yaml_claims(Path(yaml_file))
            claims.update({stem: problems[-1] for stem in stems})
            for template in templates:
                entry = generator.output_file_map.get(template)
                if entry is not None and "YAML_SRC_FULLPATH" not in entry[1]:
                    del generator.output_file_map[template]
        return claims, tuple(problems)

    def _where(self, path: Path) -> str:
        return str(path.relative_to(self.et_src)) if path.is_relative_to(self.et_src) else path.name

    @property
    def _codegen(self) -> tuple[types.ModuleType, Any]:
        """executorch's own generator module and an ``SPVGenerator`` for this tree.

        Raises:
            BuildError: the codegen cannot load.
        """
        loaded = self._loaded
        if isinstance(loaded, BuildError):
            raise loaded
        return loaded.module, loaded.generator

    def has_prebuilt(self) -> bool:
        """Whether the cache already holds variants of this tree (a GPU runner without glslc needs them)."""
        return any(self.index_dir.glob("*.json"))

    def requested(self) -> dict[str, str]:
        """Variant → module key of every variant this builder built or read from the cache in this process."""
        return dict(self._checked)

    @functools.cached_property
    def _derived(self) -> Derived:
        """What the codegen derived for exactly these inputs (``derived``): names and module keys, without running it."""
        try:
            codegen = codegen_path(self.et_src).read_bytes()
        except BuildError:
            codegen = b""
        inputs = _sha(self.tree, codegen, Path(__file__).read_bytes(), "mediump" if self.mediump else "")
        return Derived(self.cache / "derived" / f"{inputs[:32]}.json")

    def variants(self) -> VariantNames:
        """Every shader variant name the tree defines (or, without executorch, that the cache holds)."""
        stored = self._derived.variants
        if stored is not None:
            return VariantNames(*stored)
        loaded = self._loaded
        if isinstance(loaded, BuildError):
            return VariantNames(p.stem for p in self.index_dir.glob("*.json"))
        names = [n for n, (path, _) in loaded.generator.output_file_map.items() if path.endswith(".glsl")]
        self._derived.set_variants(names, loaded.claims)
        return VariantNames(names, loaded.claims)

    def unreadable_yamls(self) -> tuple[str, ...]:
        """One line per shader yaml of the tree that does not parse (its variants are ``BUILD_FAIL``)."""
        loaded = self._loaded
        return () if isinstance(loaded, BuildError) else loaded.unreadable

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
            raise self._missing(name)
        template, params = generator.output_file_map[name]
        text = Path(template).read_text(encoding="utf-8")
        return gen.preprocess(generator.maybe_replace_u16vecn(text), copy.deepcopy(params), name)

    def _missing(self, name: str) -> BuildError:
        """Why the codegen has no variant ``name``: an unreadable yaml that names it, or no such variant."""
        loaded = self._loaded
        problem = _claimant(name, loaded.claims)
        if problem is not None:
            return BuildError(f"{name}: not generated: its shader yaml is unreadable: {problem} (fix the yaml; the "
                              f"tree's other variants build)")
        broken = f" ({len(loaded.unreadable)} unreadable shader yaml, first: {loaded.unreadable[0]})" \
            if loaded.unreadable else ""
        return BuildError(f"{name}: no such shader variant in {self.glsl_dir}{broken}")

    def binding_names(self, name: str) -> dict[int, str]:
        """Binding number → variable name as the variant's generated GLSL declares it (glslc -O drops names)."""
        source = self._generate(name)
        found = re.finditer(r"layout\([^)]*\bbinding\s*=\s*(\d+)[^)]*\)[^;{]*?(\w+)\s*(?:;|\{)", source)
        names = {int(m.group(1)): m.group(2) for m in found}
        for block in re.finditer(r"layout\([^)]*\bbinding\s*=\s*(\d+)[^)]*\)[^;{]*\{[^}]*\}\s*(\w+)\s*;", source):
            names[int(block.group(1))] = block.group(2)
        return names

    def _headers(self, polyfill: bool) -> tuple[dict[str, str], dict[str, str]]:
        """Generated headers (file name → text) and those whose codegen raised (file name → why), once per mode."""
        if polyfill not in self._headers_of:
            _, generator = self._codegen
            texts, failed = {}, {}
            for name, (template, _) in generator.output_file_map.items():
                if template.endswith(".glsl"):
                    continue
                file = f"{name}{Path(template).suffix}"
                try:
                    text = self._generate(name)
                except Exception as exc:  # the tree's codegen raises anything from exec()
                    failed[file] = f"{self._where(Path(template))}: codegen failed: {type(exc).__name__}: {exc}"
                    continue
                texts[file] = _EXT_LINE.sub("", text) if polyfill else text
            self._headers_of[polyfill] = texts, failed
        return self._headers_of[polyfill]

    def _headers_hash(self, polyfill: bool) -> str:
        return _sha(*sorted(name + text for name, text in self._headers(polyfill)[0].items()))

    @property
    def include_dir(self) -> Path:
        """Generated headers (``.glslh``/``.h``) of this tree, written once per tree, compared with the codegen's."""
        return self._include(self._polyfill)

    def _include(self, polyfill: bool) -> Path:
        texts = self._headers(polyfill)[0]

        def generate(staging: Path) -> None:
            _write_headers(staging, texts)

        return cached_folder(self.cache / "include" / (self.tree + ("-poly" if polyfill else "")), generate,
                             check=lambda folder, _: _same_headers(folder, texts))

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

    def _prepared(self, name: str, polyfill: bool) -> _Prepared:
        """The variant's source as glslc gets it, the emulation applied in polyfill mode where it needs it.

        Raises:
            BuildError: codegen failed (the codegen's exception in one line).
        """
        try:
            source = self._generate(name)
        except BuildError:
            raise
        except Exception as exc:  # executorch's codegen raises anything from exec()
            raise BuildError(f"{name}: codegen failed: {type(exc).__name__}: {exc}") from None
        polyfilled = polyfill and self._uses_dot_ext(source)
        if polyfilled:
            source = _EXT_LINE.sub("", source)
            source = re.sub(r"^(#version[^\n]*\n)", lambda m: m.group(1) + DOT_POLYFILL, source, count=1, flags=re.M)
        vk_version = str(self._codegen[1].output_file_map[name][1].get("VK_VERSION", "1.1"))
        return _Prepared(source=source, polyfilled=polyfilled, flags=(*BASE_FLAGS, f"--target-env=vulkan{vk_version}"))

    def _key(self, prepared: _Prepared, polyfill: bool, glslc: str) -> str:
        """The SPIR-V cache key: what glslc is given (source, headers, flags) and which glslc."""
        return _sha(prepared.source, self._headers_hash(polyfill), " ".join(prepared.flags), glslc)

    def build(self, name: str) -> BuiltShader:
        """Compile one variant (cached; a corrupt cache entry is discarded, rebuilt and recorded as a repair).

        Raises:
            BuildError: codegen or glslc failed; the message holds the compiler's first lines (and the
                repaired entry, when a corrupt one could not be rebuilt here).
        """
        index = self.index_dir / f"{name}.json"
        try:
            entry = _index_record(index)
            key = self._checked_key(name, index, entry)
            spv, flags = _unpack(read_entry(self.cache / "spv" / f"{key}.spv"))
            return BuiltShader(name=name, spv=spv, polyfilled=entry["polyfilled"], flags=flags)
        except FileNotFoundError:
            repaired = None
        except (CacheCorruptError, ValueError) as exc:
            repaired = exc if isinstance(exc, CacheCorruptError) else CacheCorruptError(index, f"bad record: {exc}")
            self._discard(repaired)
        try:
            return self._build_fresh(name, index)
        except BuildError as exc:
            if repaired is not None:
                raise BuildError(f"{exc} (rebuilding corrupt cache entry {repaired.path}: {repaired.why})") from None
            raise

    def _checked_key(self, name: str, index: Path, entry: dict) -> str:
        """The module key of an index entry, derived again from the variant where the codegen runs (once per variant
        and set of inputs: ``derived`` keeps what a process derived).

        Raises:
            CacheCorruptError: the entry points at a module its variant does not derive.
            BuildError: the codegen cannot generate the variant.
        """
        if self._checked.get(name) == entry["key"]:
            return entry["key"]
        if self._derived.derives(name, entry["key"]) or isinstance(self._loaded, BuildError):
            self._checked[name] = entry["key"]
            return entry["key"]
        if self._mode_of(name, entry) is None:
            raise CacheCorruptError(index, f"points at module {entry['key'][:12]}, which {name}'s source, headers, "
                                           f"flags and glslc do not derive")
        self._checked[name] = entry["key"]
        self._derived.remember(name, entry["key"])
        return entry["key"]

    def _mode_of(self, name: str, entry: dict) -> bool | None:
        """The polyfill mode under which the entry's key derives from ``name``, or None when none does."""
        modes = (entry["dot_polyfill"],) if "dot_polyfill" in entry else (False, True)
        for polyfill in modes:
            if self._key(self._prepared(name, polyfill), polyfill, entry["glslc"]) == entry["key"]:
                return polyfill
        return None

    def _discard(self, error: CacheCorruptError) -> None:
        record_repair(error)
        error.path.unlink(missing_ok=True)

    def _build_fresh(self, name: str, index: Path) -> BuiltShader:
        return self._finish(name, index, self._prepared(name, self._polyfill))

    def _finish(self, name: str, index: Path, prepared: _Prepared) -> BuiltShader:
        """The module of a prepared variant (read, or compiled and stored) and its index entry."""
        key = self._key(prepared, self._polyfill, glslc_version())
        spv_path = self.cache / "spv" / f"{key}.spv"
        try:
            spv, used = _unpack(read_entry(spv_path))
        except FileNotFoundError:
            spv, used = self._compile_and_store(name, prepared, spv_path)
        except CacheCorruptError as exc:
            self._discard(exc)
            spv, used = self._compile_and_store(name, prepared, spv_path)
        write_entry(index, json.dumps({"key": key, "polyfilled": prepared.polyfilled, "glslc": glslc_version(),
                                       "dot_polyfill": self._polyfill, "tree": origin_of(self.et_src)}).encode())
        self._checked[name] = key
        self._derived.remember(name, key)
        return BuiltShader(name=name, spv=spv, polyfilled=prepared.polyfilled, flags=used)

    def build_many(self, names: Iterable[str], jobs: int) -> dict[str, BuiltShader | BuildError]:
        """Every variant of ``names``: those the cache holds read, the others generated here one by one (the tree's
        codegen is not known to be thread-safe) and compiled by up to ``jobs`` glslc processes at once."""
        import concurrent.futures

        out: dict[str, BuiltShader | BuildError] = {}
        fresh: list[tuple[str, _Prepared]] = []
        for name in names:
            index = self.index_dir / f"{name}.json"
            try:
                if index.exists():
                    out[name] = self.build(name)
                else:
                    fresh.append((name, self._prepared(name, self._polyfill)))
            except BuildError as exc:
                out[name] = exc
        if fresh:  # headers written and glslc found once, before the threads
            glslc_version()
            _ = self.include_dir, self._derived
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            done = {pool.submit(self._finish, name, self.index_dir / f"{name}.json", prepared): name
                    for name, prepared in fresh}
            for future in concurrent.futures.as_completed(done):
                try:
                    out[done[future]] = future.result()
                except BuildError as exc:
                    out[done[future]] = exc
        return out

    def _compile_and_store(self, name: str, prepared: _Prepared, spv_path: Path) -> tuple[bytes, tuple[str, ...]]:
        spv, used = self._compile(name, prepared.source, prepared.flags, self.include_dir, self._polyfill)
        write_entry(spv_path, _pack(used, spv))
        return spv, used

    def _compile(self, name: str, source: str, flags: tuple[str, ...], include: Path,
                 polyfill: bool) -> tuple[bytes, tuple[str, ...]]:
        """glslc with ``-O``, retried without it (as ET-VK's build does)."""
        with tempfile.TemporaryDirectory(prefix="vkdiff-glslc-") as tmp:
            src, out = Path(tmp, f"{name}.glsl"), Path(tmp, f"{name}.spv")
            src.write_text(source, encoding="utf-8")
            errors = ""
            for extra in (("-O",), ()):
                used = flags + extra
                done = subprocess.run(["glslc", *used, "-I", str(include), str(src), "-o", str(out)],
                                      capture_output=True, text=True)
                if done.returncode == 0:
                    return out.read_bytes(), used
                errors = done.stderr.strip() or done.stdout.strip()
        for header, why in self._headers(polyfill)[1].items():
            if header in errors:
                raise BuildError(f"{name}: its header {header} was not generated: {why}")
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

    def rechecked(self, *, repair: bool = False) -> list[Recheck]:
        """Every cached variant of this tree generated and compiled again (the cache bypassed), compared with its
        cache entries; with ``repair``, a differing module is replaced and a bad index entry deleted.

        Raises:
            BuildError: the codegen cannot load, or glslc is missing.
        """
        if isinstance(self._loaded, BuildError):
            raise self._loaded
        glslc_version()
        with tempfile.TemporaryDirectory(prefix="vkdiff-headers-") as tmp:
            fresh: dict[bool, Path] = {}

            def include(polyfill: bool) -> Path:
                if polyfill not in fresh:
                    fresh[polyfill] = Path(tmp, str(polyfill))
                    fresh[polyfill].mkdir()
                    _write_headers(fresh[polyfill], self._headers(polyfill)[0])
                return fresh[polyfill]

            return [self._recheck(index, include, repair) for index in sorted(self.index_dir.glob("*.json"))]

    def _recheck(self, index: Path, include: Callable[[bool], Path], repair: bool) -> Recheck:
        name = index.stem
        try:
            entry = _index_record(index)
            polyfill = self._mode_of(name, entry)
        except (CacheCorruptError, ValueError) as exc:
            return _corrupt(name, index, getattr(exc, "why", f"bad record: {exc}"), repair)
        except BuildError as exc:
            return Recheck(name=name, state="not checked", path=index, why=f"the codegen fails here: {exc}")
        if entry["glslc"] != glslc_version():
            return Recheck(name=name, state="not checked", path=index,
                           why=f"built with {entry['glslc']!r}; this machine has {glslc_version()!r}")
        if polyfill is None:
            return _corrupt(name, index, f"points at module {entry['key'][:12]}, which {name}'s source, headers, "
                                         f"flags and glslc do not derive", repair)
        return self._recheck_module(name, entry["key"], include(polyfill), polyfill, repair)

    def _recheck_module(self, name: str, key: str, include: Path, polyfill: bool, repair: bool) -> Recheck:
        spv_path = self.cache / "spv" / f"{key}.spv"
        try:
            cached = _unpack(read_entry(spv_path))
        except FileNotFoundError:
            return _corrupt(name, self.index_dir / f"{name}.json", f"its module {key[:12]} is missing", repair)
        except (CacheCorruptError, ValueError) as exc:
            return _corrupt(name, spv_path, getattr(exc, "why", f"bad record: {exc}"), repair)
        prepared = self._prepared(name, polyfill)
        try:
            spv, used = self._compile(name, prepared.source, prepared.flags, include, polyfill)
        except BuildError as exc:
            return _corrupt(name, spv_path, f"{name} no longer compiles, yet a module is cached: {exc}", repair)
        if (spv, used) == cached:
            return Recheck(name=name, state="sound", path=spv_path, module=spv)
        if repair:
            write_entry(spv_path, _pack(used, spv))
        return Recheck(name=name, state="corrupt", path=spv_path,
                       why=f"differs from a fresh compile of {name}" + ("; replaced" if repair else ""))


def _index_record(index: Path) -> dict:
    """An index entry, its fields typed (the key is a path component: 64 hex digits only).

    Raises:
        FileNotFoundError, CacheCorruptError: as ``read_entry``.
        ValueError: a field is missing or of the wrong type.
    """
    entry = json.loads(read_entry(index))
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not _KEY.fullmatch(entry["key"]):
        raise ValueError("no module key")
    if not isinstance(entry.get("glslc"), str) or not isinstance(entry.get("polyfilled"), bool) or \
            not isinstance(entry.get("dot_polyfill", False), bool):
        raise ValueError("glslc, polyfilled or dot_polyfill missing or mistyped")
    return entry


def _corrupt(name: str, path: Path, why: str, repair: bool) -> Recheck:
    """A corrupt entry found by ``rechecked``; with ``repair`` it is deleted (made again when next used)."""
    if repair:
        path.unlink(missing_ok=True)
    return Recheck(name=name, state="corrupt", path=path, why=why + ("; deleted" if repair else ""))


def _write_headers(folder: Path, texts: Mapping[str, str]) -> None:
    for name, text in texts.items():
        (folder / name).write_text(text, encoding="utf-8")


def _same_headers(folder: Path, texts: Mapping[str, str]) -> None:
    """Raise ``CacheCorruptError`` unless ``folder`` holds exactly the headers the codegen generates."""
    present = {p.name: p for p in folder.iterdir() if p.name != MANIFEST}
    for name in sorted(set(present) | set(texts)):
        if name not in present or name not in texts or present[name].read_bytes() != texts[name].encode():
            raise CacheCorruptError(folder / name, "differs from what the tree's codegen generates")
