"""``vkdiff bisect device CASE --results ...``: several runners' results grouped, the split named, nothing run."""

from __future__ import annotations

from vkdiff.bisect.device import bisect_results
from vkdiff.datamodel import Result
from vkdiff.entry import cli
from vkdiff.store import ResultStore

CASE = "model[pte-forward]"


def _result(device: str, status: str, f16_denorm: str, *, transport: str = "vulkan", node: int | None = None,
            case: str = CASE) -> Result:
    info = {"transport": transport, "driver": f"driver of {device}", "vendor": device.split("-")[0],
            "traits": {"f16_denorm": f16_denorm, "subgroup_size": 32, "div_f32_max_ulp": 0.5 + len(device) / 100}}
    return Result(case=case, op="pte", rule="device", device=device, status=status, device_info=info,
                  knobs={"route": "native"}, node={} if node is None else {"index": node}, shader="mm_half")


def test_a_trait_shared_by_every_failing_device_is_named_before_the_devices():
    results = [_result("nvidia-h200", "PASS", "preserved"), _result("mesa-llvmpipe", "PASS", "preserved"),
               _result("arm-mali-g715", "FAIL_NUMERIC", "flushed", node=7),
               _result("qualcomm-adreno-750", "FAIL_NUMERIC", "flushed", node=7)]
    found = bisect_results(CASE, results)
    assert found.lines() == [
        f"{CASE}: 4 configurations, 2 distinct results",
        "PASS: everywhere else (2 configurations)",
        "FAIL_NUMERIC at node 7 (mm_half): only where trait.f16_denorm = flushed (2 configurations)",
    ]


def test_the_latest_result_of_a_configuration_counts_and_other_cases_are_ignored():
    results = [_result("nvidia-h200", "FAIL_NUMERIC", "preserved", node=2), _result("nvidia-h200", "PASS", "preserved"),
               _result("mesa-llvmpipe", "PASS", "preserved"), _result("nvidia-h200", "ERROR", "preserved", case="x")]
    assert bisect_results(CASE, results).lines()[1:] == ["PASS: everywhere (2 configurations)"]


def test_the_command_groups_merged_files_and_exits_1_when_devices_differ(tmp_path, capsys):
    files = []
    for runner, result in (("a", _result("mesa-llvmpipe", "PASS", "preserved")),
                           ("b", _result("arm-mali-g715", "FAIL_NUMERIC", "flushed", node=7))):
        files.append(tmp_path / f"{runner}.jsonl")
        ResultStore(files[-1]).append(result)
    assert cli.main(["bisect", "device", CASE, "--results", *map(str, files)]) == 1
    out = capsys.readouterr().out
    assert "FAIL_NUMERIC at node 7 (mm_half): only where device = arm-mali-g715 (1 configurations)" in out
    assert cli.main(["bisect", "device", "other[pte-forward]", "--results", *map(str, files)]) == cli.EXIT_USAGE
    assert f"cases there: {CASE}" in capsys.readouterr().err
