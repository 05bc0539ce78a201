"""Exceptions of pipeline stages → statuses: ET-VK's own refusals and skipped delegates."""

from __future__ import annotations

from vkdiff.datamodel import Status
from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.transports.wgpu_device import naga_missing_capability
from vkdiff.device.graph.delegate import MissingLaunchersError
from vkdiff.executors.program import DelegateSkipped
from vkdiff.verdicts.statuses import status_of_exception


def test_an_et_vk_host_check_refusal_is_fail_check_naming_it():
    status, reason = status_of_exception(EtVkRefusal("ET-VK refuses arange: check_arange_input needs int start"))
    assert status is Status.FAIL_CHECK and reason.startswith("ET-VK refuses arange")


def test_a_skipped_delegate_takes_its_causes_status():
    skipped = DelegateSkipped(0, MissingLaunchersError("no launcher for et_vk.q8ta_conv2d.default"))
    assert status_of_exception(skipped) == (Status.NOT_RUN, "delegate 0: no launcher for et_vk.q8ta_conv2d.default")
    refused = DelegateSkipped(1, EtVkRefusal("mean: refused"))
    assert status_of_exception(refused)[0] is Status.FAIL_CHECK


def test_a_plain_value_error_stays_a_harness_error():
    status, reason = status_of_exception(ValueError("the case declares route=dw but the arguments take route=pw"))
    assert status is Status.ERROR and reason.startswith("ValueError: the case declares")


def test_naga_nan_literals_are_named_as_what_naga_lacks():
    assert naga_missing_capability("... = Float literal is NaN | Float literal is NaN", set()) == \
        "NaN float literals (naga: Float literal is NaN)"
    assert naga_missing_capability("Constant expression [3] is invalid", set()) is None
