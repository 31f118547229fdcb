"""README.md, followed to the letter on a fresh data directory (issue 15's walkthrough).

The sections on running home, talking without a board and memory are run as written
(:mod:`tests.readme.walkthrough`): every command must exit 0 and print what the
README shows. Only two things differ from a person's machine, both through the
environment the README's commands already read: the language model is the scripted
test double (``TETHER_LLM_URL``), and the bridge listens on a free port
(``TETHER_BRIDGE_PORT``). ``HOME`` is the test's folder, so ``~`` is fresh.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from shared.proc import free_port
from tests.readme.walkthrough import SECTIONS, Block, blocks, failures, run
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ANSWER = "Hello from home."


def _env(home: Path, llm_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "XDG_"))}
    env.update(
        HOME=str(home),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        TETHER_LLM_URL=llm_url,
        TETHER_BRIDGE_PORT=str(free_port()),
    )
    return env


def _speak(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": ANSWER})


def test_the_walkthrough_covers_every_section() -> None:
    found = blocks((ROOT / "README.md").read_text())
    assert {b.section for b in found} == set(SECTIONS)
    commands = [c for b in found for c in b.commands]
    # The first-hour path: start home, wait for it, talk through the bridge, use memory, stop.
    for needed in ("home up", "home status", "edge say", "home memory put", "home memory search"):
        assert any(c.startswith(needed) for c in commands), needed
    assert commands[-1].startswith("kill")


def test_a_command_that_fails_fails_the_walkthrough(tmp_path: Path) -> None:
    readme = (
        "## Running home\n\n```sh\nhome status --json   # no home runs here\n```\n\n"
        "## Memory\n\n```sh\necho kept\n```\n\n```text\nkept\nnot printed\n```\n"
    )
    steps = blocks(readme)
    env = _env(tmp_path, "http://127.0.0.1:9/v1")
    problems = failures(run(steps, cwd=tmp_path, env=env, timeout_s=60))
    assert len(problems) == 2
    assert "README.md:3 (Running home): `home status --json` exited 1" in problems[0]
    assert "lacks 'not printed'" in problems[1]


def test_parsing_joins_continuations_and_drops_comments() -> None:
    (block,) = blocks(
        "## Memory\n\n```sh\n# a note\nhome memory put a/b \\\n    'x # y'   # store\n```\n"
    )
    assert block == Block("Memory", 3, ["home memory put a/b      'x # y'"])


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    steps = blocks((ROOT / "README.md").read_text())
    async with ScriptedModel(responder=_speak) as model:
        env = _env(tmp_path, model.url)
        results = await asyncio.to_thread(run, steps, cwd=tmp_path, env=env, timeout_s=780)
    problems = failures(results)
    logs = sorted((tmp_path / "walkthrough-logs").glob("*.log"))
    tails = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs)
    assert not problems, "\n\n".join(problems) + "\n\n" + tails
    # The answer came from the model through the bridge, not from anywhere else.
    assert any(ANSWER in r.output for r in results if r.command.startswith("edge say"))
