"""``--suite upstream``: the tree's delegate tests are captured by replacing their lowering helpers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from tests.testutils import requires_tree
from vkdiff.cases import upstream

FAKE = textwrap.dedent('''
    import functools
    import unittest

    import torch

    def disable_test(reason):
        def decorator(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                print(f"DISABLED_TEST: {fn.__qualname__}: {reason}")
            return wrapper
        return decorator

    def lower_module(model, sample_inputs, dynamic_shapes=None):
        raise AssertionError("lowering must not run while collecting")

    def quantize_and_lower_module(model, sample_inputs, quantizer, dynamic_shapes=None):
        raise AssertionError("lowering must not run while collecting")

    class TestVulkanBackend(unittest.TestCase):
        def lower_module_and_test_output(self, *args, **kwargs):
            raise AssertionError("the real helper must be replaced")

        def test_add(self):
            m = torch.nn.Linear(3, 2)
            self.lower_module_and_test_output(m, (torch.rand(4, 3),), atol=1e-2)
            self.lower_module_and_test_output(m, (torch.rand(1, 3),), test_inputs=[(torch.rand(2, 3),)])

        @disable_test("swiftshader says no")
        def test_softmax(self):
            self.lower_module_and_test_output(torch.nn.Softmax(dim=-1), (torch.rand(2, 12),))

        def test_own_instance(self):
            TestVulkanBackend().lower_module_and_test_output(torch.nn.ReLU(), (torch.rand(5),))

        def test_quantized(self):
            program = quantize_and_lower_module(torch.nn.ReLU(), (torch.rand(5),), quantizer="Q").to_executorch()
            self.check_vk_delegation(program)
            self.run_delegated_model_and_check_output(program, torch.nn.ReLU(), (torch.rand(5),), atol=0.5)

        def test_broken(self):
            raise ValueError("upstream test bug")

        def test_nothing(self):
            pass
''')


@pytest.fixture
def fake_tree(tmp_path: Path) -> Path:
    path = tmp_path / "backends" / "vulkan" / "test" / "test_vulkan_delegate.py"
    path.parent.mkdir(parents=True)
    path.write_text(FAKE)
    upstream.collect.cache_clear()
    return tmp_path


def test_every_lowering_request_is_captured_with_the_tests_own_settings(fake_tree):
    found = upstream.collect(fake_tree)
    assert [c.id for c in found.captures] == ["upstream::test_add#0", "upstream::test_add#1",
                                              "upstream::test_own_instance#0", "upstream::test_quantized#0",
                                              "upstream::test_softmax#0"]
    first, second = found.captures[:2]
    assert first.atol == 1e-2 and first.rtol == 1e-1 and first.test_inputs == ()
    assert second.atol == 1e-3 and len(second.test_inputs) == 1 and tuple(second.test_inputs[0][0].shape) == (2, 3)
    quantized = found.captures[3]
    assert quantized.lowering == "quantize_and_lower_module" and quantized.atol == 0.5
    assert found.captures[4].disabled == "swiftshader says no"
    assert found.silent == {"test_broken": "the test raised ValueError: upstream test bug",
                            "test_nothing": "asked for no lowering"}


def test_the_helpers_are_restored_and_inputs_are_seeded_by_test_name(fake_tree):
    first = upstream.collect(fake_tree)
    import sys

    cls = sys.modules[upstream.MODULE_NAME].TestVulkanBackend
    with pytest.raises(AssertionError, match="must be replaced"):
        cls("test_add").lower_module_and_test_output(None, ())
    upstream.collect.cache_clear()
    again = upstream.collect(fake_tree)
    for a, b in zip(first.captures, again.captures):
        torch.testing.assert_close(a.sample_inputs, b.sample_inputs, rtol=0, atol=0)
    assert not torch.equal(first.captures[0].sample_inputs[0][:1], first.captures[1].sample_inputs[0])


def test_cases_are_model_cases_judged_by_the_tests_tolerance(fake_tree):
    cases = upstream.model_cases(fake_tree, pattern=r"test_(add|softmax)")
    assert [c.id for c in cases] == ["upstream::test_add#0", "upstream::test_add#1", "upstream::test_softmax#0"]
    add = cases[0]
    assert add.pipeline == "upstream" and add.tolerance.atol == 1e-2 and add.tolerance.rtol == 1e-1
    assert len(cases[1].more_calls) == 1 and add.knobs["lowering"] == "lower_module"
    assert cases[2].knobs["disabled_upstream"] == "swiftshader says no"


def test_a_tree_without_the_tests_is_one_line(tmp_path):
    with pytest.raises(upstream.UpstreamError, match="test_vulkan_delegate.py does not exist; give a full "):
        upstream.collect(tmp_path)


@requires_tree
def test_the_pinned_tree_gives_its_128_lowerings(et_tree):
    found = upstream.collect(et_tree)
    assert len(found.captures) >= 120 and len({c.test for c in found.captures}) >= 90
    ids = {c.id for c in found.captures}
    assert {"upstream::test_vulkan_backend_add#0", "upstream::test_vulkan_backend_add#1",
            "upstream::test_select_last_height_dynamic_shapes#0"} <= ids
    assert sum(bool(c.disabled) for c in found.captures) >= 10
