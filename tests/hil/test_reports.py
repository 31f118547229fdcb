"""HIL reports: JUnit parses, JSON carries every measurement, the HTML page shows its plots."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hil.model import Measurement
from hil.report import write_reports
from hil.runner import Case, CaseFailed, Suite, run_suites


async def _passing(ctx: dict[str, int]) -> list[Measurement]:
    ctx["runs"] += 1
    return [Measurement("asr_ms", 120.0 + i, "ms", stage="asr", sample=i) for i in range(3)] + [
        Measurement("agent_ms", 400.0 + 10 * i, "ms", stage="agent", sample=i) for i in range(3)
    ]


async def _failing(ctx: dict[str, int]) -> list[Measurement]:
    raise CaseFailed("expected a turn event on home within 10 s; none arrived")


async def _broken(ctx: dict[str, int]) -> list[Measurement]:
    raise RuntimeError("ssh session closed")


async def _slow(ctx: dict[str, int]) -> list[Measurement]:
    await asyncio.sleep(5)
    return []


async def _logs() -> str:
    return "edge[42]: bridge: link down (connection refused)"


async def test_runner_verdicts_and_all_three_reports(tmp_path: Path) -> None:
    suite = Suite(
        "turn",
        (
            Case("one_turn", _passing),
            Case("no_answer", _failing),
            Case("harness_broke", _broken),
            Case("too_slow", _slow, timeout_s=0.2),
        ),
    )
    ctx = {"runs": 0}
    run = await run_suites("virtual", [suite], ctx, _logs)
    assert ctx["runs"] == 1
    assert [c.verdict for c in run.cases] == ["pass", "fail", "error", "fail"]
    assert "did not finish within" in run.cases[3].reason
    assert "bridge: link down" in run.cases[1].logs
    assert not run.ok

    paths = write_reports(run, tmp_path / "out")
    tree = ET.parse(paths["junit"])
    suite_el = tree.getroot().find("testsuite")
    assert suite_el is not None
    assert suite_el.get("tests") == "4"
    assert suite_el.get("failures") == "2"
    assert suite_el.get("errors") == "1"
    failure = suite_el.find("testcase[@name='no_answer']/failure")
    assert failure is not None and "none arrived" in (failure.get("message") or "")

    doc = json.loads(paths["json"].read_text())
    assert doc["counts"] == {"pass": 1, "fail": 2, "error": 1, "skip": 0}
    assert len(doc["cases"][0]["measurements"]) == 6

    page = paths["html"].read_text()
    assert page.count("<svg") >= 1
    assert "Latency per stage" in page
    assert "none arrived" in page
    assert 'src="http' not in page
    assert "<link" not in page


@pytest.mark.slow
def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: `make test` installs the Debian package")
    suite = Suite("turn", (Case("one_turn", _passing),))
    run = asyncio.run(run_suites("virtual", [suite], {"runs": 0}, _logs))
    paths = write_reports(run, tmp_path)
    shot = tmp_path / "report.png"
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={shot}", "--window-size=1200,1400", paths["html"].as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG")
    assert len(data) > 20_000  # a page with a plot, not a blank frame


async def _traced(ctx: dict[str, int]) -> list[Measurement]:
    return [
        m
        for i in range(10)
        for m in (
            Measurement("wait_ms", 1000.0 + 100 * i, "ms", sample=i),
            Measurement("wait_endpointing_ms", 300.0, "ms", stage="endpointing", sample=i),
            Measurement("wait_model_ms", 700.0 + 100 * i, "ms", stage="model", sample=i),
        )
    ]


async def test_the_wait_is_summarized_per_stage_in_json_and_html(tmp_path: Path) -> None:
    run = await run_suites("virtual", [Suite("turn", (Case("turns", _traced),))], {}, _logs)
    paths = write_reports(run, tmp_path)
    wait = json.loads(paths["json"].read_text())["turn_wait"]
    assert list(wait) == ["endpointing", "model", "wait"]
    assert wait["wait"]["n"] == 10
    assert wait["wait"]["p50_ms"] == 1400.0 and wait["wait"]["p95_ms"] == 1900.0
    page = paths["html"].read_text()
    assert "end of speech → first audio" in page and "<svg" in page
