"""``vkdiff cache build``: every variant of a tree compiled in parallel into the cache, then read, never rebuilt."""

from __future__ import annotations

import re

from tests.testutils import requires_glslc, requires_tree
from vkdiff.datamodel import CACHE_ENV
from vkdiff.entry import cli

pytestmark = [requires_tree, requires_glslc]
VARIANTS = r"^(binary_add|binary_sub)_"


def test_a_build_compiles_each_variant_once_and_a_run_reads_it(et_tree, tmp_path, monkeypatch, capsys):
    from vkdiff.device.shaders.build import ShaderBuilder

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    assert cli.main(["cache", "build", "--et-src", str(et_tree), "--variants", VARIANTS, "-j", "2"]) == 0
    first = capsys.readouterr().out
    count = int(re.search(r": (\d+) variants, 0 already cached, (\d+) built now, 0 BUILD_FAIL", first).group(1))
    builder = ShaderBuilder(et_tree)
    names = sorted(n for n in builder.variants() if re.search(VARIANTS, n))
    assert count == len(names) > 4
    assert all((builder.index_dir / f"{n}.json").exists() for n in names)
    assert cli.main(["cache", "build", "--et-src", str(et_tree), "--variants", VARIANTS]) == 0
    assert f": {count} variants, {count} already cached, 0 built now, 0 BUILD_FAIL" in capsys.readouterr().out
    one = builder.build(names[0])
    assert one.spv[:4] == b"\x03\x02\x23\x07"
