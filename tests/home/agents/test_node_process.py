"""``python -m home.agents.node_process`` as the supervisor runs it: a process, status, signals."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from tests.support.home_fixtures import REPO_ROOT, EdgeSide
from tests.support.scripted_model import Reply, ScriptedModel


async def node_process(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "home.agents.node_process", *args,
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_the_node_runs_as_a_process_answers_and_stops_on_sigterm(
    nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.script(Reply.call("speak", {"text": "Hello from a process."}))
    proc = await node_process(
        "--catalog", "schemas/nodes.yaml", "--node", "agent.edge_asr",
        "--nats", nats_url, "--data-dir", str(tmp_path),
        "--llm-url", model.url, "--llm-profile", "openai", "--json",
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    try:
        async with asyncio.timeout(60):
            running = json.loads(await proc.stdout.readline())
        assert running["state"] == "running" and running["tau_pid"] > 0
        await edge.say("hello", received=lambda: len(edge.on("speak.tui")))
        (speak,) = await edge.wait_for("speak.tui")
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            stopped = json.loads(await proc.stdout.readline())
            code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await proc.stderr.read()
    assert speak.event.payload["text"] == "Hello from a process."
    assert stopped == {"node": "agent.edge_asr", "state": "stopped", "turns": 1}
    assert code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node", "agent.nobody"], "no node 'agent.nobody'"),
        (["--node", "effector.journal_append"], "not a τ agent"),
    ],
)
async def test_bad_usage_exits_2_and_says_why(
    args: list[str], message: str, tmp_path: Path
) -> None:
    proc = await node_process(*args, "--nats", "nats://127.0.0.1:1", "--data-dir", str(tmp_path))
    async with asyncio.timeout(60):
        _, err = await proc.communicate()
    assert proc.returncode == 2
    assert message in err.decode()
