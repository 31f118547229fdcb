"""``home memory judge``: the reflex's own path for the home it is pointed at."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from home.agents.tau_command import write_tau_home
from home.llm.endpoint import ModelEndpoint, embedded_endpoint
from home.memory.errors import RestatementError
from home.memory.judge import home_evaluator
from tests.support.scripted_model import Reply, ScriptedModel

AGENT = "edge_asr_memory"


def judge_cli(*args: str) -> tuple[int, dict[str, object] | str]:
    run = subprocess.run(
        [sys.executable, "-m", "home.cli", "memory", "judge", *args, "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if run.returncode != 0:
        return run.returncode, run.stderr
    found: dict[str, object] = json.loads(run.stdout)
    return 0, found


def tau_home_of(data_dir: Path) -> Path:
    return data_dir / "agents" / AGENT / "tau-home"


def test_the_embedded_home_keeps_the_users_own_words(tmp_path: Path) -> None:
    # The home at --data-dir runs the embedded model: the draft path, as its reflex does.
    write_tau_home(tau_home_of(tmp_path), embedded_endpoint("http://127.0.0.1:9/v1", "speak"))
    code, judged = judge_cli(
        "um remember this my sister ingrid lives in trondheim", "what is the weather",
        "--data-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 0 and isinstance(judged, dict), judged
    assert judged["path"] == "draft" and "tau-home" in str(judged["evaluator"])
    kept, skipped = judged["judgements"]  # type: ignore[misc]
    assert kept["decision"] == "keep" and kept["score"] >= 0
    assert kept["memory"] == "The user's sister ingrid lives in trondheim."
    assert kept["memory_source"] == "draft"
    assert skipped["decision"] == "skip" and skipped["memory"] is None
    assert skipped["cue"] == "question"
    (memory,) = judged["memories"]  # type: ignore[misc]
    assert memory["invented"] == []


async def test_a_home_behind_a_model_url_is_judged_by_that_model_and_checked(
    tmp_path: Path,
) -> None:
    answer = "- The user's sister Ingrid lives in Trondheim.\n- The user's name is Theresa."
    async with ScriptedModel() as model:
        model.script(Reply.say(answer))
        write_tau_home(tau_home_of(tmp_path), ModelEndpoint(model.url, model="big"))
        code, judged = await asyncio.to_thread(
            judge_cli, "my sister Ingrid lives in Trondheim", "--data-dir", str(tmp_path)
        )
    assert code == 0 and isinstance(judged, dict), judged
    assert judged["path"] == "model"
    faithful, refused = judged["memories"]  # type: ignore[misc]
    assert faithful["memory"] == "The user's sister Ingrid lives in Trondheim."
    assert faithful["invented"] == [] and faithful["path"] == "model"
    assert refused["invented"] == ["name", "theresa"]
    (request,) = model.requests
    assert request.body["model"] == "big"
    assert "my sister Ingrid lives in Trondheim" in json.dumps(request.body["messages"])


def test_the_home_evaluator_is_read_from_the_agents_tau_home(tmp_path: Path) -> None:
    assert home_evaluator(tmp_path, AGENT).path == "draft"  # never ran: the defaults
    write_tau_home(tau_home_of(tmp_path), ModelEndpoint("http://127.0.0.1:1/v1", model="m"))
    evaluator = home_evaluator(tmp_path, AGENT)
    assert evaluator.path == "model" and evaluator.model is not None
    assert evaluator.model.base_url == "http://127.0.0.1:1/v1"
    (tau_home_of(tmp_path) / "config.json").write_text("{not json")
    with pytest.raises(RestatementError, match=r"tau-home/config\.json"):
        home_evaluator(tmp_path, AGENT)


def test_a_model_that_does_not_answer_is_a_failure_naming_the_url(tmp_path: Path) -> None:
    code, err = judge_cli("my dog is Rex", "--llm-url", "http://127.0.0.1:9/v1")
    assert code == 1 and "127.0.0.1:9" in str(err), err
