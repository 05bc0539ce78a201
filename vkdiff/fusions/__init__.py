"""Fusion rules: what ET-VK's passes must produce and the invariants they must keep."""

from vkdiff.fusions import (bf16_export, cat_qparams, expected_fusions, tied_weights, transposed_scales, weight_zero_points,  # noqa: F401
                            vk_cat_qparams, zero_point_dtype)
from vkdiff.fusions.registry import RULES, Finding, FusionContext, register_rule

__all__ = ["RULES", "Finding", "FusionContext", "register_rule"]
