"""Agent turn overhead outside the model, and one-sentence latency with the embedded model.

Scripted model (a test double), 200 turns each:

- sensation publish → first model request: what the node adds before τ asks the model;
- model's final answer → speak event: what τ and the handset add after it.

Peer, in the same run: τ's own builtin ``nats_bus`` extension (the other posture),
which subscribes the inbound rail itself with no node in front. Goal: ≤ 10 ms each.

Conversations (docs/architecture.md "Sessions"), the agent's conversations in a real
JMFTS as ``home up`` keeps them, two devices taking turns in pairs (kitchen,
kitchen, tui, tui, ...), so every other turn moves τ to the other device's
conversation:

- the switch itself (``switch_session``, τ loading the conversation from JMFTS);
- publish → first model request for a turn that switched, against the same figure
  for a turn on the device that spoke last (no switch), same run. Goal: switching
  adds ≤ 5 ms at p99;
- resume after a τ restart: SIGKILL of τ → the next turn's first model request
  (the restart policy's 0.5 s backoff, τ's start, the switch, the prompt), and the
  part of it after τ is back.
- a new device's first turn with ``NEW_DEVICES`` conversations already stored,
  against the first devices' (few stored): τ's new persisted conversation, finding
  its ref, naming it. Goal: independent of how many conversations exist.

Embedded model (SmolLM2-135M on llama.cpp): end of utterance → speak event for a
one-sentence answer, a few turns, reported as measured.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import nats
from nats.aio.msg import Msg

from home.agents.agent_node import AgentNode
from home.agents.sessions import FileStore, JmftsStore, jmfts_sessions_path
from home.jmfts.client import JmftsClient
from home.jmfts.component import provision_principal
from home.llm.endpoint import ModelEndpoint, embedded_endpoint
from home.llm.server import LlamaServer, LlamaServerConfig, default_threads
from shared.event import Event, new_binding_id
from shared.schema.catalog import NodeSpec, load_node_catalog, parse_node_catalog
from shared.subjects import speech_completed_subject, workspace_in_subject
from shared.yaml_source import parse_yaml
from tests.bench.report import Result, publish, quantile
from tests.support.home_fixtures import event_log_server
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

REPO_ROOT = Path(__file__).resolve().parents[2]
TURNS = int(os.environ.get("BENCH_AGENT_TURNS", "200"))
SESSION_TURNS = int(os.environ.get("BENCH_SESSION_TURNS", "200"))
RESUMES = int(os.environ.get("BENCH_RESUMES", "5"))
EMBEDDED_TURNS = int(os.environ.get("BENCH_EMBEDDED_TURNS", "5"))
NEW_DEVICES = int(os.environ.get("BENCH_NEW_DEVICES", "100"))
WARMUP = 5

BUS_CATALOG = """
catalog: bench
nodes:
  agent.edge_asr:
    kind: tau_bus_agent
    runs_on: home
    publishes: [events.workspace.edge_asr.out.>]
    subscribes: [events.workspace.edge_asr.in]
"""


class Edge:
    """Publishes utterances, acks speech, and timestamps the speak events it sees."""

    def __init__(self, nc: Any) -> None:
        self.nc = nc
        self.speaks: dict[str, float] = {}
        self.seq = 0

    async def on_speak(self, msg: Msg) -> None:
        at = time.monotonic()
        event = Event.from_json(msg.data)
        assert event.binding_id is not None
        self.speaks.setdefault(event.binding_id, at)
        self.seq += 1
        ack = Event.new("speech.completed", {"ok": True}, source="edge.audio.tui",
                        sequence_number=self.seq, binding_id=event.binding_id)  # fmt: skip
        await self.nc.publish(speech_completed_subject(event.binding_id), ack.to_json())

    async def turn(
        self, text: str, timeout_s: float = 120.0, device: str = "tui"
    ) -> tuple[str, float]:
        """Publish one utterance and wait for its speak; return (binding id, publish time).

        The same event is published again every 2 s without an answer: a fresh
        subscription on nats-server occasionally misses its first message, and the
        node deduplicates on event_id.
        """
        self.seq += 1
        binding_id = new_binding_id()
        event = Event.new("sensation.turn", {"text": text, "device": device},
                          source=f"edge.audio.{device}", sequence_number=self.seq,
                          binding_id=binding_id)  # fmt: skip
        data = event.to_json()
        t0 = time.monotonic()
        async with asyncio.timeout(timeout_s):
            while binding_id not in self.speaks:
                await self.nc.publish(workspace_in_subject("edge_asr"), data)
                for _ in range(2000):
                    if binding_id in self.speaks:
                        break
                    await asyncio.sleep(0.001)
        return binding_id, t0


def speak_back(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": "Yes."})


async def scripted_run(
    spec: NodeSpec, nats_url: str, data_dir: Path
) -> tuple[list[float], list[float], list[float]]:
    """(publish → first model request, final answer → speak, publish → prompt written) in ms."""
    to_model: list[float] = []
    to_speak: list[float] = []
    to_prompt: list[float] = []
    published: dict[str, float] = {}
    async with ScriptedModel(speak_back) as model:
        nc = await nats.connect(nats_url)
        edge = Edge(nc)
        await nc.subscribe("events.workspace.edge_asr.out.speak.>", cb=edge.on_speak)
        await nc.subscribe("events.workspace.edge_asr.out.speak", cb=edge.on_speak)
        await nc.flush()
        try:
            async with AgentNode(spec, nats_url=nats_url, data_dir=data_dir,
                                 model=ModelEndpoint(base_url=model.url),
                                 repo_root=REPO_ROOT) as node:  # fmt: skip
                await asyncio.sleep(0.5)
                for i in range(WARMUP + TURNS):
                    n = len(model.requests)
                    binding, t0 = await edge.turn(f"question {i}")
                    if i < WARMUP:
                        continue
                    request = model.requests[n]
                    to_model.append((request.at - t0) * 1000)
                    to_speak.append((edge.speaks[binding] - model.reply_sent_at[n]) * 1000)
                    published[binding] = t0
                # The outcome is recorded at agent_end, which follows the speak ack.
                await asyncio.sleep(0.5)
                for outcome in node.stats.outcomes:
                    if outcome.binding_id in published:
                        to_prompt.append(
                            (outcome.prompted_at - published[outcome.binding_id]) * 1000
                        )
        finally:
            await nc.drain()
    return to_model, to_speak, to_prompt


@dataclass
class SessionFigures:
    """What the conversations run measured, in ms."""

    # (turns the conversation held, ms) for each turn that switched.
    switch: list[tuple[int, float]] = field(default_factory=list)
    switched_to_model: list[float] = field(default_factory=list)
    same_device_to_model: list[float] = field(default_factory=list)
    resume: list[float] = field(default_factory=list)
    resume_after_tau_up: list[float] = field(default_factory=list)


@asynccontextmanager
async def jmfts_store(data_dir: Path) -> AsyncIterator[JmftsStore]:
    """JMFTS in a process of its own, as under ``home up`` (not on the bench's event loop),
    and the agent's principal with write on ``journal/edge_asr``, as ``home up`` gives it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "home.cli", "jmfts", "serve", "--data-dir", str(data_dir / "jmfts"),
        "--port", "0", "--json", stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        info = json.loads(await asyncio.wait_for(proc.stdout.readline(), 120))
        token_file = data_dir / "edge_asr.token"
        admin_token = Path(info["admin_token_file"])
        async with JmftsClient.from_token_file(info["url"], admin_token) as admin:
            await provision_principal(
                admin, "agent.edge_asr", [("journal/edge_asr", "write")], token_file
            )
        yield JmftsStore(info["url"], token_file, jmfts_sessions_path("edge_asr"))
    finally:
        proc.terminate()
        await proc.wait()


@asynccontextmanager
async def file_store(data_dir: Path) -> AsyncIterator[FileStore]:
    """τ's file store under the agent's run directory (a node without JMFTS)."""
    yield FileStore(data_dir / "agents" / "edge_asr" / "sessions")


async def sessions_run(
    spec: NodeSpec, nats_url: str, data_dir: Path, *, in_jmfts: bool
) -> SessionFigures:
    """Two devices in pairs of turns, then ``RESUMES`` SIGKILLs of τ, each followed by a turn."""
    figures = SessionFigures()
    stored = jmfts_store(data_dir) if in_jmfts else file_store(data_dir)
    # Each kill is the first restart in its window: the shipped backoff, never a longer one.
    spec = replace(spec, restart_policy=replace(spec.restart_policy, window_s=1.0))
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    async with ScriptedModel(speak_back) as model, stored as store:
        nc = await nats.connect(nats_url)
        edge = Edge(nc)
        await nc.subscribe("events.workspace.edge_asr.out.speak.>", cb=edge.on_speak)
        await nc.flush()
        try:
            async with AgentNode(spec, nats_url=nats_url, data_dir=data_dir,
                                 model=ModelEndpoint(base_url=model.url),
                                 repo_root=REPO_ROOT, sessions=store) as node:  # fmt: skip
                await asyncio.sleep(0.5)
                for i in range(WARMUP + SESSION_TURNS):
                    device = ("kitchen", "tui")[(i // 2) % 2]
                    n = len(model.requests)
                    binding, t0 = await edge.turn(f"question {i}", device=device)
                    await until_outcome(node, binding)
                    if i < WARMUP:
                        continue
                    outcome = next(o for o in node.stats.outcomes if o.binding_id == binding)
                    to_model = (model.requests[n].at - t0) * 1000
                    if outcome.switched:
                        figures.switch.append(((i - WARMUP) // 2, outcome.switch_s * 1000))
                        figures.switched_to_model.append(to_model)
                    else:
                        figures.same_device_to_model.append(to_model)
                for i in range(RESUMES):
                    await asyncio.sleep(1.5)
                    await resume_once(node, edge, model, figures, f"after kill {i}")
        finally:
            await nc.drain()
    return figures


async def first_turns_run(spec: NodeSpec, nats_url: str, data_dir: Path) -> list[float]:
    """``NEW_DEVICES`` devices' first turns, one after another, in JMFTS: each one's move
    onto its new conversation, in ms, in the order the devices came."""
    entered: list[float] = []
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    async with ScriptedModel(speak_back) as model, jmfts_store(data_dir) as store:
        nc = await nats.connect(nats_url)
        edge = Edge(nc)
        await nc.subscribe("events.workspace.edge_asr.out.speak.>", cb=edge.on_speak)
        await nc.flush()
        try:
            async with AgentNode(spec, nats_url=nats_url, data_dir=data_dir,
                                 model=ModelEndpoint(base_url=model.url),
                                 repo_root=REPO_ROOT, sessions=store) as node:  # fmt: skip
                await asyncio.sleep(0.5)
                for i in range(NEW_DEVICES):
                    binding, _ = await edge.turn(f"hello from board {i}", device=f"board{i}")
                    await until_outcome(node, binding)
                    outcome = next(o for o in node.stats.outcomes if o.binding_id == binding)
                    entered.append(outcome.switch_s * 1000)
        finally:
            await nc.drain()
    return entered


def first_turn_results(entered: list[float]) -> list[Result]:
    """A new device's first turn with many conversations stored, the first devices' as peer."""
    few = entered[: max(1, len(entered) // 10)]
    many = entered[-max(1, len(entered) // 10) :]
    return [
        Result(
            metric=f"new device's first turn: onto its new conversation, "
            f"≥ {len(entered) - len(many)} stored, JMFTS {label}",
            value=quantile(many, q),
            unit="ms",
            n=len(many),
            peer=f"< {len(few)} stored",
            peer_value=quantile(few, q),
            note="new_session, its ref found, named; goal: flat in the number stored",
        )
        for label, q in (("p50", 0.5), ("p99", 0.99))
    ]


async def until_outcome(node: AgentNode, binding: str) -> None:
    """Wait for the turn's agent_end (the outcome follows the speak ack)."""
    async with asyncio.timeout(60):
        while not any(o.binding_id == binding for o in node.stats.outcomes):
            await asyncio.sleep(0.001)


async def resume_once(
    node: AgentNode, edge: Edge, model: ScriptedModel, figures: SessionFigures, text: str
) -> None:
    """SIGKILL τ, then one turn from kitchen: kill → its first model request."""
    pid, restarts = node.tau_pid, node.stats.restarts
    assert pid is not None
    n = len(model.requests)
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    turn = asyncio.create_task(edge.turn(text, device="kitchen"))
    async with asyncio.timeout(60):
        while node.stats.restarts == restarts:
            await asyncio.sleep(0.001)
    tau_up = time.monotonic()
    binding, _ = await turn
    await until_outcome(node, binding)
    asked = model.requests[n].at
    figures.resume.append((asked - killed) * 1000)
    figures.resume_after_tau_up.append((asked - tau_up) * 1000)


def session_results(jmfts: SessionFigures, files: SessionFigures) -> list[Result]:
    """The conversations runs as rows of the table: JMFTS (home up's), the file store as peer."""
    results: list[Result] = []
    quarter = SESSION_TURNS // 8
    longest = SESSION_TURNS // 2
    for span, low, high in (
        (f"≤ {quarter} turns", 0, quarter),
        (f"≥ {longest - quarter} turns", longest - quarter, longest),
    ):
        ours = [ms for held, ms in jmfts.switch if low <= held <= high]
        peer = [ms for held, ms in files.switch if low <= held <= high]
        for label, q in (("p50", 0.5), ("p99", 0.99)):
            results.append(
                Result(
                    metric=f"switch onto a conversation of {span}, JMFTS {label}",
                    value=quantile(ours, q),
                    unit="ms",
                    n=len(ours),
                    peer="τ's file store",
                    peer_value=quantile(peer, q),
                    note="τ loads the whole conversation from its store",
                )
            )
    for figures, store in ((jmfts, "JMFTS"), (files, "file store")):
        for label, q in (("p50", 0.5), ("p99", 0.99)):
            results.append(
                Result(
                    metric=f"publish → first model request, turn that switched, {store} {label}",
                    value=quantile(figures.switched_to_model, q),
                    unit="ms",
                    n=len(figures.switched_to_model),
                    peer="same device, no switch",
                    peer_value=quantile(figures.same_device_to_model, q),
                    note="goal: switching adds ≤ 5 ms p99",
                )
            )
        results.append(
            Result(
                metric=f"resume after τ SIGKILL → next turn's first model request, {store} p50",
                value=statistics.median(figures.resume),
                unit="ms",
                n=len(figures.resume),
                peer="of which after τ is back (switch + prompt)",
                peer_value=statistics.median(figures.resume_after_tau_up),
                note=f"max {max(figures.resume):.0f} ms; includes the policy's 0.5 s backoff",
            )
        )
    return results


async def embedded_run(spec: NodeSpec, nats_url: str, data_dir: Path, threads: int) -> list[float]:
    """End of utterance → speak event, in seconds, with the embedded model."""
    latencies: list[float] = []
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    config = LlamaServerConfig(
        log_path=data_dir / "llama.log", n_threads=threads, n_threads_batch=threads
    )
    async with LlamaServer(config) as llm:
        nc = await nats.connect(nats_url)
        edge = Edge(nc)
        await nc.subscribe("events.workspace.edge_asr.out.speak.>", cb=edge.on_speak)
        await nc.flush()
        try:
            async with AgentNode(spec, nats_url=nats_url, data_dir=data_dir,
                                 model=embedded_endpoint(llm.url, "speak"),
                                 repo_root=REPO_ROOT):  # fmt: skip
                await asyncio.sleep(0.5)
                questions = ["What colour is the sky?", "Is water wet?", "What is two plus two?",
                             "Say hello.", "Is it day or night?"]  # fmt: skip
                for i in range(EMBEDDED_TURNS + 1):
                    binding, t0 = await edge.turn(questions[i % len(questions)])
                    if i == 0:
                        continue  # the first turn pays llama.cpp's warm-up
                    latencies.append(edge.speaks[binding] - t0)
        finally:
            await nc.drain()
    return latencies


async def run() -> list[Result]:
    catalog = load_node_catalog(REPO_ROOT / "schemas" / "nodes.yaml")
    node_spec = catalog["agent.edge_asr"]
    bus_spec = parse_node_catalog(parse_yaml(BUS_CATALOG, "bench.yaml"), "bench.yaml")[
        "agent.edge_asr"
    ]
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        # Each run on its own server: the node's durable inbox would otherwise keep, and
        # later answer, the utterances published while the peer ran.
        async with event_log_server(Path(tmp) / "ours") as url:
            node_in, node_out, node_prompt = await scripted_run(node_spec, url, Path(tmp) / "n")
        async with event_log_server(Path(tmp) / "peer") as url:
            bus_in, bus_out, _ = await scripted_run(bus_spec, url, Path(tmp) / "bus")
        async with event_log_server(Path(tmp) / "sessions") as url:
            jmfts = await sessions_run(node_spec, url, Path(tmp) / "sessions", in_jmfts=True)
        async with event_log_server(Path(tmp) / "sessions-file") as url:
            files = await sessions_run(node_spec, url, Path(tmp) / "sessions-f", in_jmfts=False)
        results.extend(session_results(jmfts, files))
        async with event_log_server(Path(tmp) / "first-turns") as url:
            entered = await first_turns_run(node_spec, url, Path(tmp) / "first-turns")
        results.extend(first_turn_results(entered))
        async with event_log_server(Path(tmp) / "embedded-bus") as url:
            for metric, ours, peer in (
                ("publish → first model request", node_in, bus_in),
                ("final answer → speak event", node_out, bus_out),
            ):
                for label, q in (("p50", 0.5), ("p99", 0.99)):
                    results.append(
                        Result(
                            metric=f"{metric} {label}",
                            value=quantile(ours, q),
                            unit="ms",
                            n=len(ours),
                            peer="τ builtin nats_bus",
                            peer_value=quantile(peer, q),
                            note="goal ≤ 10 ms; scripted model",
                        )
                    )
            for label, q in (("p50", 0.5), ("p99", 0.99)):
                results.append(
                    Result(
                        metric=f"publish → prompt written to τ (the node's share) {label}",
                        value=quantile(node_prompt, q),
                        unit="ms",
                        n=len(node_prompt),
                        note="the rest of publish → request is τ's own",
                    )
                )
            threads = default_threads()
            embedded = await embedded_run(node_spec, url, Path(tmp) / "embedded", threads)
            wider = await embedded_run(node_spec, url, Path(tmp) / "embedded2", threads + 1)
            results.append(
                Result(
                    metric=f"utterance → speak, embedded SmolLM2-135M p50 (n_threads={threads})",
                    value=statistics.median(embedded),
                    unit="s",
                    n=len(embedded),
                    peer=f"n_threads={threads + 1}",
                    peer_value=statistics.median(wider),
                    note=f"max {max(embedded):.2f} s; one-sentence answers in prose",
                )
            )
    return results


def main() -> None:
    """Run the benchmark, print the table, write bench-results/agents.json."""
    publish("agents", asyncio.run(run()))
