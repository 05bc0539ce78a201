"""Reports in a real browser: headless Chromium renders them, runs their script, and shows the key parts.

The screenshots are kept under ``tests/reports/artifacts/`` (not committed) for a person to look at.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tests.reports.helpers import ARTIFACTS, CHROMIUM, chromium, parse_html, result, write_jsonl
from vkdiff.reports import render_reports

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="NOT_RUN: chromium not installed")

SHAPES = ("M1-K64-N40-g32", "M4-K256-N64-g64", "M13-K4096-N40-g128")
VARIANTS = ("fp32-buffer", "fp32-texture3d", "fp16-buffer", "fp16-texture3d")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Two devices, 24 results: mali garbles the fp16 texture path, adreno lacks one feature."""
    root = tmp_path_factory.mktemp("browser")
    lines = []
    for device in ("adreno", "mali"):
        for shape in SHAPES:
            for variant in VARIANTS:
                case = f"linear_q4gsw[{shape}-{variant}]"
                status = "PASS"
                if device == "mali" and variant == "fp16-texture3d":
                    status = "FAIL_NUMERIC"
                if device == "adreno" and shape == SHAPES[2] and variant == "fp16-buffer":
                    status = "NOT_SUPPORTED"
                lines.append(result(case, device, status))
    return render_reports([write_jsonl(root / "results.jsonl", lines)], root / "report")


def _screenshot(page, name, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = tmp_path / f"{name}.png"
    done = chromium(f"--screenshot={png}", "--window-size=1400,1800", page.resolve().as_uri(),
                    profile=tmp_path / "profile")
    assert png.is_file(), f"chromium wrote no screenshot (rc {done.returncode}): {done.stderr[-2000:]}"
    shutil.copyfile(png, ARTIFACTS / png.name)
    return png


@pytest.mark.parametrize("page", ("mali", "cross-device"))
def test_screenshot_is_not_blank(report, page, tmp_path):
    path = report.devices[page] if page in report.devices else report.cross_device
    png = _screenshot(path, f"report-{page}", tmp_path)
    assert png.stat().st_size > 20_000
    from matplotlib import image as mpimg

    pixels = mpimg.imread(png)[..., :3]
    assert pixels.shape[:2] == (1800, 1400)
    colours = np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
    assert len(colours) > 50, "screenshot is (nearly) a single colour"
    # status colours are on screen: the PASS green and the FAIL_NUMERIC red of the badges and matrix
    rgb = (pixels * 255).astype(np.int16)
    for colour in ((0x2E, 0x7D, 0x32), (0xD3, 0x2F, 0x2F)):
        assert (np.abs(rgb - colour).max(axis=-1) <= 2).sum() > 200, f"colour {colour} not on screen"


def test_dom_after_script_has_summary_and_matrix(report, tmp_path):
    done = chromium("--dump-dom", report.devices["mali"].resolve().as_uri(), profile=tmp_path / "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = parse_html(done.stdout)
    assert "js-ready" in dom.find("html").attrs.get("class", ""), "the page script did not run to the end"
    summary = dom.find("section", id="summary")
    failing = len(SHAPES)  # mali's fp16-texture3d column
    assert f"{failing} failing 12 results" in " ".join(summary.text.split())
    matrix = dom.find("table", cls="matrix", data_op="linear_q4gsw")
    assert len(matrix.find("tbody").find_all("tr")) == len(SHAPES)
    assert sum("FAIL_NUMERIC" in td.attrs.get("title", "") for td in matrix.find_all("td", cls="cell")) == failing
    assert len(dom.find("section", id="failures").find_all("article", cls="card")) == failing
