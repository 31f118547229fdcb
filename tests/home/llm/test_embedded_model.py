"""The embedded model for real: SmolLM2-135M under llama.cpp, and one whole turn through τ."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from home.agents.agent_node import AgentNode
from home.agents.compaction import context_tokens
from home.llm.endpoint import EMBEDDED_SAMPLING, embedded_endpoint, forced_tool_choice
from home.llm.errors import ModelFileError
from home.llm.model_file import packaged_gguf
from home.llm.serve import render_chat_prompt
from home.llm.server import LlamaServer
from home.tau_extensions.handset import SPEAK_SCHEMA
from shared.schema.catalog import NodeCatalog
from tests.support.home_fixtures import REPO_ROOT, EdgeSide


def test_the_gguf_is_found_through_package_metadata() -> None:
    path = packaged_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    with pytest.raises(ModelFileError, match="not installed"):
        packaged_gguf("no-such-model-package")


@pytest.mark.slow
async def test_server_lifecycle_and_a_schema_constrained_tool_call(llm: LlamaServer) -> None:
    assert await llm.health()
    body = {
        "model": "smollm2",
        "messages": [
            {"role": "system", "content": "Answer by calling speak."},
            {"role": "user", "content": "What colour is the sky?"},
        ],
        "tools": [{"type": "function", "function": {"name": "speak", "parameters": SPEAK_SCHEMA}}],
        "tool_choice": forced_tool_choice("speak"),
        "max_tokens": 64,
    }
    async with httpx.AsyncClient(timeout=120) as client:
        answer = (await client.post(f"{llm.url}/chat/completions", json=body)).json()
    (call,) = answer["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "speak"
    arguments = json.loads(call["function"]["arguments"])
    assert isinstance(arguments["text"], str)


@pytest.mark.slow
async def test_a_seeded_answer_repeats_whatever_the_server_answered_in_between(
    llm: LlamaServer,
) -> None:
    """The shipped sampling with a seed: the same request answers the same text."""
    endpoint = embedded_endpoint(llm.url, None, sampling=replace(EMBEDDED_SAMPLING, seed=11))
    entry = endpoint.tau_entry()

    def asking(prompt: str) -> dict[str, object]:
        return {
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 40, "temperature": entry["temperature"], **entry["extra_body"],
        }  # fmt: skip

    story = asking("tell me a very short story about a cat")
    async with httpx.AsyncClient(timeout=120) as client:
        answers = []
        for body in (story, asking("name a colour"), story):
            reply = (await client.post(f"{llm.url}/chat/completions", json=body)).json()
            answers.append(reply["choices"][0]["message"]["content"])
    assert answers[0] and answers[0] == answers[2], answers


@pytest.mark.slow
async def test_a_streamed_answer_runs_to_its_end_while_the_health_check_waits(
    llm: LlamaServer,
) -> None:
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "Give me a tip for sleeping better."}],
        "tools": [{"type": "function", "function": {"name": "speak", "parameters": SPEAK_SCHEMA}}],
        "max_tokens": 48,
        "stream": True,
    }
    pieces: list[str] = []
    finish: list[str] = []
    async with httpx.AsyncClient(timeout=120) as client:
        health: asyncio.Task[httpx.Response] | None = None
        async with client.stream("POST", f"{llm.url}/chat/completions", json=body) as stream:
            async for line in stream.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                choice = json.loads(line[len("data: ") :])["choices"][0]
                pieces.append(choice["delta"].get("content") or "")
                if choice.get("finish_reason"):
                    finish.append(choice["finish_reason"])
                if health is None:
                    # A request waiting for the model while the answer streams.
                    health = asyncio.create_task(client.get(f"{llm.url}/models"))
        assert health is not None
        assert (await health).status_code == 200
    assert finish in (["stop"], ["length"])
    assert len([p for p in pieces if p]) > 3


@pytest.mark.slow
@pytest.mark.usefixtures("verbatim_prompts")
async def test_apostrophes_and_ampersands_reach_the_model_and_come_back_unescaped(
    llm: LlamaServer,
) -> None:
    messages = [
        {"role": "system", "content": "You repeat what the user says."},
        {"role": "user", "content": "Repeat exactly: it's Tom & Jerry"},
    ]
    body = {"model": "smollm2", "messages": messages, "temperature": 0, "max_tokens": 32}
    async with httpx.AsyncClient(timeout=120) as client:
        answer = (await client.post(f"{llm.url}/chat/completions", json=body)).json()
        verbatim = render_chat_prompt(messages)
        count_url = f"{llm.url.removesuffix('/v1')}/extras/tokenize/count"
        verbatim_tokens = (await client.post(count_url, json={"input": verbatim})).json()

    # The server tokenized exactly the verbatim prompt: &#39; and &amp; would add tokens.
    assert answer["usage"]["prompt_tokens"] == verbatim_tokens["count"]
    text = answer["choices"][0]["message"]["content"]
    assert "&#39;" not in text
    assert "&amp;" not in text


@pytest.mark.slow
async def test_a_turn_with_the_embedded_model_ends_in_a_speak_or_a_reply(
    llm: LlamaServer, catalog: NodeCatalog, nats_url: str, edge: EdgeSide, tmp_path: Path
) -> None:
    async with AgentNode(
        catalog["agent.edge_asr"],
        nats_url=nats_url,
        data_dir=tmp_path,
        model=embedded_endpoint(llm.url, "speak"),
        repo_root=REPO_ROOT,
    ) as node:
        said = await edge.say("What colour is the sky?", received=lambda: node.stats.received)
        async with asyncio.timeout(120):
            while not node.stats.outcomes:
                await asyncio.sleep(0.05)

    answers = [e for e in edge.seen if e.subject.startswith("events.workspace.edge_asr.out.")
               and (".speak." in e.subject or ".reply." in e.subject)]  # fmt: skip
    assert answers, "the turn ended without a speak or a reply"
    assert all(a.event.binding_id == said.binding_id for a in answers)
    assert answers[0].event.payload["text"].strip()
    assert node.stats.outcomes[0].end_reason in ("terminate", "done")


@pytest.mark.slow
async def test_home_llm_serve_prints_its_url_serves_and_stops_on_sigterm() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "home.cli", "llm", "serve", "--json",
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(120):
            started = json.loads(await proc.stdout.readline())
        async with httpx.AsyncClient(timeout=10) as client:
            models = (await client.get(f"{started['url']}/models")).json()
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert [m["id"] for m in models["data"]] == ["smollm2-135m-instruct"]
    assert code == 0


@pytest.mark.slow
async def test_a_long_conversation_never_outgrows_the_window(
    llm: LlamaServer,
    catalog: NodeCatalog,
    nats_url: str,
    edge: EdgeSide,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A small window the whole session would outgrow within a few turns (prose answers of
    # a sentence or two add some 50 tokens a turn); the server shows the model the last
    # turns only (home.llm.serve --history_turns), so no request comes near it, and the
    # node compacts the conversation τ keeps (τ, seeing small prompts, never would).
    endpoint = replace(embedded_endpoint(llm.url, "speak"), context_window=1024)
    questions = ["What colour is the sky?", "Is water wet?", "What is two plus two?",
                 "Name a fruit.", "Is it day or night?", "Say something kind."]  # fmt: skip
    async with AgentNode(
        catalog["agent.edge_asr"],
        nats_url=nats_url,
        data_dir=tmp_path,
        model=endpoint,
        repo_root=REPO_ROOT,
    ) as node:
        for n, question in enumerate(questions * 4, start=1):
            await edge.say(question, received=lambda: node.stats.received)
            async with asyncio.timeout(120):
                while len(node.stats.outcomes) + node.stats.failed < n:
                    await asyncio.sleep(0.05)
        tau = node._tau.current  # the test reads the session the node owns
        assert tau is not None
        messages = (await tau.request("get_messages", {}))["messages"]

    assert [o.error for o in node.stats.outcomes if o.error] == []
    assert len(node.stats.outcomes) == 24
    used = [m["usage"]["total_tokens"] for m in messages if m.get("role") == "assistant"]
    assert max(used) < endpoint.context_window // 2, used
    # Every compaction the node asked for folded the conversation (by the node's
    # ``compact``, or by τ's own auto-compaction as the turn ended).
    assert node.stats.compactions_asked > 0
    said = [r.getMessage() for r in caplog.records if "compact" in r.getMessage()]
    assert node.stats.compactions_unperformed == 0, said
    assert node.stats.compaction_failures == 0, said
    # What τ keeps stays bounded: its summary, and the turns since.
    assert context_tokens(messages) < endpoint.context_window, messages
