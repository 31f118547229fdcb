"""`bridge check`: one broken pair per rule, the shipped pairs, and the CLI's exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from bridge.check import RULES, Finding, Severity, check_pair, has_errors
from shared import subjects
from shared.schema import SubjectDecl, load_bridge_half

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "schemas" / "bridge"


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return Path(f"{path}.pub").read_text().strip()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("keys")
    return {name: _keygen(d / name) for name in ("host", "board", "other")}


def _pair(keys: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A clean, fully keyed pair derived from the shipped board halves."""
    edge = yaml.safe_load((SHIPPED / "board.edge.yaml").read_text())
    home = yaml.safe_load((SHIPPED / "board.home.yaml").read_text())
    edge["connect"]["host_key"] = keys["host"]
    edge["connect"]["client_key"] = keys["board"]
    home["listen"]["host_key"] = keys["host"]
    home["listen"]["authorized_key"] = keys["board"]
    return edge, home


def _write(tmp_path: Path, edge: dict[str, Any], home: dict[str, Any]) -> tuple[Path, Path]:
    e, h = tmp_path / "x.edge.yaml", tmp_path / "x.home.yaml"
    e.write_text(yaml.safe_dump(edge, sort_keys=False))
    h.write_text(yaml.safe_dump(home, sort_keys=False))
    return e, h


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def _findings(tmp_path: Path, edge: dict[str, Any], home: dict[str, Any]) -> list[Finding]:
    e, h = _write(tmp_path, edge, home)
    return check_pair(load_bridge_half(e), load_bridge_half(h))


def test_a_fully_keyed_pair_is_clean(tmp_path: Path, keys: dict[str, str]) -> None:
    assert _findings(tmp_path, *_pair(keys)) == []


DELETE = object()
Mutation = Callable[[dict[str, Any], dict[str, Any], dict[str, str]], None]


def _set(side: str, *path_and_value: Any) -> Mutation:
    *path, value = path_and_value

    def mutate(edge: dict[str, Any], home: dict[str, Any], keys: dict[str, str]) -> None:
        node = edge if side == "edge" else home
        for key in path[:-1]:
            node = node[key]
        if value is DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = value(keys) if callable(value) else value

    return mutate


def _both_edge(edge: dict[str, Any], home: dict[str, Any], keys: dict[str, str]) -> None:
    home.clear()
    home.update(edge | {"device": edge["device"]})


# rule id -> (mutation, file suffix of the finding, text on the finding's line, words)
CASES: dict[str, tuple[Mutation, str, str, str]] = {
    "B001": (_both_edge, "home", "side: edge", "both halves are side 'edge'"),
    "B002": (_set("home", "bridge", "kitchen"), "home", "bridge: kitchen", "two different"),
    "B003": (_set("home", "device", "tui"), "home", "device: tui", "device 'tui'"),
    "B004": (_set("home", "listen", "port", 2022), "edge", "port: 2222", "listens on 2022"),
    "B005": (_set("home", "listen", "host_key", lambda k: k["other"]), "edge", "host_key:",
             "would refuse"),
    "B006": (_set("edge", "connect", "host_key", DELETE), "edge", "connect:", "no host key"),
    "B007": (_set("home", "listen", "authorized_key", lambda k: k["other"]), "home",
             "authorized_key:", "authorizes key"),
    "B008": (_set("home", "listen", "authorized_key", DELETE), "home", "listen:", "authorized_key"),
    "B009": (_set("home", "listen", "user", "pi"), "edge", "user: tether", "expects 'pi'"),
    "B010": (_set("home", "imports", ["events.action.speech.completed.*"]), "edge",
             "events.sensation.board.turn", "not imported"),
    "B011": (_set("edge", "imports", ["events.workspace.edge_asr.out.speak.board",
                                      "events.workspace.*.out.reply.board"]),
             "home", "events.workspace.*.out.speak.board", "would be dropped"),
    "B012": (_set("home", "exports", ["events.workspace.*.out.speak.board"]),
             "edge", "events.workspace.*.out.reply.board", "exported by nothing"),
    "B020": (_set("edge", "exports", ["events.sensation.board.turn",
                                      "events.action.speech.completed.*", "events.audio.board"]),
             "edge", "events.audio.board", "could carry audio"),
    "B021": (_set("edge", "imports", ["events.workspace.*.out.speak.board",
                                      "events.workspace.*.out.reply.board",
                                      "events.sensation.*.turn"]),
             "edge", "events.sensation.*.turn", "echo back"),
    "B022": (_set("edge", "exports", ["events.sensation.tui.turn",
                                      "events.action.speech.completed.*"]),
             "edge", "events.sensation.tui.turn", "names device 'tui'"),
    "B023": (_set("home", "exports", ["events.workspace.*.out.speak.board",
                                      "events.workspace.*.out.reply.board",
                                      "events.workspace.*.out.memorize.*"]),
             "home", "events.workspace.*.out.memorize.*", "no memory leaves home"),
    "B030": (_set("home", "limits", {"max_event_bytes": 1024, "max_string_bytes": 8192,
                                     "outbox_events": 10}),
             "home", "limits:", "refused on arrival"),
}  # fmt: skip


def test_every_rule_has_a_case() -> None:
    assert set(CASES) == set(RULES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_finds_its_broken_pair(tmp_path: Path, keys: dict[str, str], rule: str) -> None:
    mutate, side, on_line, says = CASES[rule]
    edge, home = _pair(keys)
    mutate(edge, home, keys)
    e, h = _write(tmp_path, edge, home)
    findings = check_pair(load_bridge_half(e), load_bridge_half(h))
    mine = [f for f in findings if f.rule == rule]
    assert mine, findings
    target = e if side == "edge" else h
    assert any(
        f.file == str(target) and f.line == _line_of(target, on_line) and says in f.message
        for f in mine
    ), mine
    assert all(f.severity is RULES[rule].severity for f in mine)
    assert has_errors(findings) == any(f.severity is Severity.ERROR for f in findings)


def test_a_delegations_answer_is_memory_text_and_never_exported(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    edge, home = _pair(keys)
    home["exports"] = [*home["exports"], "events.workspace.*.out.answer.edge_asr"]
    edge["imports"] = [*edge["imports"], "events.workspace.*.out.answer.edge_asr"]
    findings = [f for f in _findings(tmp_path, edge, home) if f.rule == "B023"]
    assert len(findings) == 1 and "a delegation's answers" in findings[0].message, findings


def test_wildcard_semantics_a_wider_import_covers_the_export(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    edge, home = _pair(keys)
    home["imports"] = ["events.sensation.board.>", "events.action.>"]
    edge["exports"] = ["events.sensation.board.turn", "events.action.speech.completed.*"]
    assert [f.rule for f in _findings(tmp_path, edge, home)] == []


def _bridge(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("bridge")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("device", ["board", "tui"])
def test_shipped_pairs_pass(device: str) -> None:
    run = _bridge(
        "check", str(SHIPPED / f"{device}.edge.yaml"), str(SHIPPED / f"{device}.home.yaml")
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "OK: 0 error(s)" in run.stdout


def test_removing_one_home_export_fails_naming_subject_and_line(tmp_path: Path) -> None:
    home_text = (SHIPPED / "board.home.yaml").read_text()
    removed = "  - events.workspace.*.out.reply.board\n"
    assert removed in home_text
    home = tmp_path / "board.home.yaml"
    home.write_text(home_text.replace(removed, ""))
    edge = SHIPPED / "board.edge.yaml"
    run = _bridge("check", str(edge), str(home))
    assert run.returncode == 1
    line = _line_of(edge, "events.workspace.*.out.reply.board")
    assert f"{edge}:{line}:" in run.stdout
    assert "'events.workspace.*.out.reply.board'" in run.stdout
    assert "B012" in run.stdout


def test_a_home_half_exporting_memorize_reports_fails_with_the_memory_rule(
    tmp_path: Path,
) -> None:
    home_text = (SHIPPED / "board.home.yaml").read_text()
    reply = "  - events.workspace.*.out.reply.board\n"
    home = tmp_path / "board.home.yaml"
    home.write_text(home_text.replace(reply, reply + "  - events.workspace.*.out.memorize.*\n"))
    edge_text = (SHIPPED / "board.edge.yaml").read_text()
    edge = tmp_path / "board.edge.yaml"
    edge.write_text(edge_text.replace(reply, reply + "  - events.workspace.*.out.memorize.board\n"))
    run = _bridge("check", str(edge), str(home))
    assert run.returncode == 1, run.stdout
    line = _line_of(home, "events.workspace.*.out.memorize.*")
    assert f"{home}:{line}:" in run.stdout and "B023" in run.stdout, run.stdout
    assert "memory text" in run.stdout


def test_json_output(tmp_path: Path) -> None:
    run = _bridge(
        "check", "--json", str(SHIPPED / "tui.edge.yaml"), str(SHIPPED / "board.home.yaml")
    )
    assert run.returncode == 1
    report = json.loads(run.stdout)
    assert report["ok"] is False
    rules = {f["rule"] for f in report["findings"]}
    assert {"B002", "B003", "B010", "B012"} <= rules
    assert all({"rule", "name", "severity", "file", "line", "message"} <= set(f)
               for f in report["findings"])  # fmt: skip


def test_unreadable_or_foreign_files_exit_2(tmp_path: Path) -> None:
    edge = str(SHIPPED / "board.edge.yaml")
    missing = _bridge("check", edge, str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr
    not_half = _bridge("check", edge, str(ROOT / "schemas" / "nodes.yaml"))
    assert not_half.returncode == 2
    assert "not a bridge half" in not_half.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("bridge: board\nside: edge\n  device: x\n")
    bad = _bridge("check", "--json", edge, str(broken))
    assert bad.returncode == 2
    assert json.loads(bad.stdout)["issues"][0]["line"] == 3


def test_help_teaches() -> None:
    run = _bridge("check", "--help")
    assert run.returncode == 0
    assert "Exit status" in run.stdout


def test_the_check_grows_linearly_with_what_a_half_declares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hostile hello once froze home: every export was compared with every import.

    Work is counted as subject parses (each pairwise comparison parses both sides):
    400 exports and 400 imports on each half took 1,288,000 before the index, 11,200 after.
    """
    n = 400
    parses = 0
    real_split = subjects.split_subject

    def counting_split(subject: str) -> list[str]:
        nonlocal parses
        parses += 1
        return real_split(subject)

    monkeypatch.setattr(subjects, "split_subject", counting_split)
    edge = load_bridge_half(SHIPPED / "board.edge.yaml")
    home = load_bridge_half(SHIPPED / "board.home.yaml")
    turns = tuple(SubjectDecl(f"events.sensation.board.t{i}", i) for i in range(n))
    speech = tuple(SubjectDecl(f"events.workspace.a{i}.out.speak.board", i) for i in range(n))
    edge = replace(edge, exports=turns, imports=speech)
    home = replace(home, exports=speech[::-1], imports=turns[::-1])
    findings = check_pair(edge, home)
    assert not [f for f in findings if f.rule in ("B010", "B011", "B012", "B021")]
    assert parses < 40 * n
