"""HIL reports: JUnit XML for CI systems, JSON with every measurement, one self-contained HTML page.

The HTML page embeds its plots as inline SVG (matplotlib figures, no pyplot state), so it
opens anywhere without network or sibling files.
"""

from __future__ import annotations

import html
import io
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from matplotlib.figure import Figure

from hil.model import CaseResult, RunResult
from hil.wait import TOTAL as WAIT
from hil.wait import summarize


def write_reports(run: RunResult, out_dir: Path) -> dict[str, Path]:
    """Write ``junit.xml``, ``results.json`` and ``report.html`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "junit": out_dir / "junit.xml",
        "json": out_dir / "results.json",
        "html": out_dir / "report.html",
    }
    paths["junit"].write_bytes(junit_xml(run))
    paths["json"].write_text(json.dumps(run.to_dict(), indent=2, default=str))
    paths["html"].write_text(html_report(run), encoding="utf-8")
    return paths


def junit_xml(run: RunResult) -> bytes:
    """JUnit XML: one ``testsuite`` per suite, one ``testcase`` per case."""
    root = ET.Element("testsuites", name=f"hil {run.target}")
    by_suite: dict[str, list[CaseResult]] = defaultdict(list)
    for case in run.cases:
        by_suite[case.suite].append(case)
    for suite, cases in by_suite.items():
        node = ET.SubElement(
            root,
            "testsuite",
            name=suite,
            tests=str(len(cases)),
            failures=str(sum(c.verdict == "fail" for c in cases)),
            errors=str(sum(c.verdict == "error" for c in cases)),
            skipped=str(sum(c.verdict == "skip" for c in cases)),
            time=f"{sum(c.duration_s for c in cases):.3f}",
            timestamp=run.started.isoformat(),
        )
        for case in cases:
            tc = ET.SubElement(
                node, "testcase", classname=f"hil.{suite}", name=case.name,
                time=f"{case.duration_s:.3f}",
            )  # fmt: skip
            if case.verdict in ("fail", "error"):
                child = ET.SubElement(tc, "failure" if case.verdict == "fail" else "error",
                                      message=case.reason[:500])  # fmt: skip
                child.text = case.logs[-20_000:] or case.reason
            elif case.verdict == "skip":
                ET.SubElement(tc, "skipped", message=case.reason)
            if case.measurements:
                props = ET.SubElement(tc, "properties")
                for m in case.measurements:
                    label = m.name if m.sample is None else f"{m.name}[{m.sample}]"
                    ET.SubElement(props, "property", name=label, value=f"{m.value:g} {m.unit}")
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]


def latency_plot(run: RunResult) -> str | None:
    """A stacked bar per sample of the per-stage latencies, as inline SVG; None if none."""
    stages: dict[str, dict[int, float]] = defaultdict(dict)
    for case in run.cases:
        for m in case.measurements:
            if m.stage is not None and m.sample is not None and m.unit == "ms":
                stages[m.stage][m.sample] = m.value
    if not stages:
        return None
    samples = sorted({s for per in stages.values() for s in per})
    fig = Figure(figsize=(8, 3.5))
    ax = fig.subplots()
    bottom = [0.0] * len(samples)
    for stage, per in stages.items():
        values = [per.get(s, 0.0) for s in samples]
        ax.bar([str(s) for s in samples], values, bottom=bottom, label=stage)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xlabel("turn")
    ax.set_ylabel("latency (ms)")
    ax.set_title("Latency per stage (end of speech to first audio, per turn)")
    ax.legend(fontsize="small", ncols=2)
    return _svg(fig)


def wait_table(run: RunResult) -> str:
    """End of speech to first audio over the run's turns: p50, p95 and mean per stage."""
    summary = summarize(run.turn_waits())
    if not summary:
        return "<p>No turn was traced from end of speech to first audio.</p>"
    rows = "".join(
        f"<tr><td>{'<b>end of speech → first audio</b>' if stage == WAIT else html.escape(stage)}"
        f"</td><td>{row['n']:.0f}</td><td>{row['p50_ms']:.0f} ms</td>"
        f"<td>{row['p95_ms']:.0f} ms</td><td>{row['mean_ms']:.0f} ms</td></tr>"
        for stage, row in summary.items()
    )
    return (
        "<table><tr><th>stage</th><th>turns</th><th>p50</th><th>p95</th><th>mean</th></tr>"
        f"{rows}</table>"
    )


def series_plot(run: RunResult, name: str, title: str) -> str | None:
    """A line of one measurement over its samples (e.g. RSS during a soak); None if absent."""
    points = sorted(
        (m.sample, m.value, m.unit)
        for c in run.cases
        for m in c.measurements
        if m.name == name and m.sample is not None
    )
    if len(points) < 2:
        return None
    fig = Figure(figsize=(8, 3))
    ax = fig.subplots()
    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
    ax.set_xlabel("sample")
    ax.set_ylabel(points[0][2])
    ax.set_title(title)
    return _svg(fig)


_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem;color:#222}
h1{margin-bottom:.2rem} .sub{color:#666;margin-top:0}
table{border-collapse:collapse;width:100%;margin:1rem 0}
th,td{border-bottom:1px solid #ddd;padding:.35rem .5rem;text-align:left;vertical-align:top}
.pass{color:#176f2c;font-weight:600}.fail,.error{color:#b3261e;font-weight:600}.skip{color:#777}
.verdict{font-size:1.4rem} pre{background:#f6f6f6;padding:.7rem;overflow-x:auto;font-size:.8rem}
figure{margin:1rem 0}
"""


def html_report(run: RunResult) -> str:
    """One self-contained page: verdicts, measurements, plots, and logs of failing cases."""
    counts = run.counts()
    verdict = "PASS" if run.ok else "FAIL"
    rows = []
    for c in run.cases:
        figures = ", ".join(
            f"{html.escape(m.name)}{'' if m.sample is None else f'[{m.sample}]'}="
            f"{m.value:.4g} {html.escape(m.unit)}"
            for m in c.measurements[:12]
        )
        rows.append(
            f"<tr><td>{html.escape(c.suite)}</td><td>{html.escape(c.name)}</td>"
            f"<td class='{c.verdict}'>{c.verdict}</td><td>{c.duration_s:.2f} s</td>"
            f"<td>{html.escape(c.reason)}</td><td>{figures}</td></tr>"
        )
    plots = [
        p
        for p in (
            latency_plot(run),
            series_plot(run, "rss_mb", "Memory (RSS) during the run"),
            series_plot(run, "cpu_percent", "CPU during the run"),
        )
        if p
    ]
    failing = [
        f"<h3>{html.escape(c.suite)} / {html.escape(c.name)}</h3><pre>"
        f"{html.escape(c.logs[-20_000:] or c.reason)}</pre>"
        for c in run.cases
        if c.verdict in ("fail", "error")
    ]
    env = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in run.environment.items()
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>HIL report: {html.escape(run.target)}</title>
<style>{_CSS}</style></head><body>
<h1>HIL report</h1>
<p class="sub">target <b>{html.escape(run.target)}</b> · suites {html.escape(", ".join(run.suites))}
· {run.started:%Y-%m-%d %H:%M:%S} UTC · {(run.finished - run.started).total_seconds():.1f} s</p>
<p class="verdict {"pass" if run.ok else "fail"}">{verdict}: {counts["pass"]} passed,
{counts["fail"]} failed, {counts["error"]} errors, {counts["skip"]} skipped</p>
<table><tr><th>suite</th><th>case</th><th>verdict</th><th>time</th><th>reason</th>
<th>measurements</th></tr>{"".join(rows)}</table>
<h2>End of speech to first audio</h2>{wait_table(run)}
<h2>Plots</h2>{"".join(f"<figure>{p}</figure>" for p in plots) or "<p>No measurements to plot.</p>"}
<h2>Logs of failing cases</h2>{"".join(failing) or "<p>None failed.</p>"}
<h2>Environment</h2><table>{env}</table>
</body></html>
"""
