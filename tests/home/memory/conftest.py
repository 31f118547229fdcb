"""Fixtures for the memory reflex: a real JMFTS, a real nats-server, real τ agent nodes,
and the scripted model server (the one double) that answers turns and evaluations."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import nats
import pytest

from home.agents.agent_node import AgentNode
from home.jmfts.testing import RunningJmfts, running_jmfts
from home.llm.endpoint import ModelEndpoint, forced_tool_choice
from home.memory.evaluator import EVALUATOR_MARKER
from shared.schema.catalog import NodeCatalog, NodeSpec
from tests.support.home_fixtures import REPO_ROOT, EdgeSide
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel, content_text

AGENT = "edge_asr_memory"
NODE = f"agent.{AGENT}"


def system_text(request: RecordedRequest) -> str:
    """The system prompt the client sent."""
    return "".join(
        content_text(m.get("content")) for m in request.messages if m.get("role") == "system"
    )


def is_evaluation(request: RecordedRequest) -> bool:
    """Whether a model request came from the reflex's evaluator (its own system prompt)."""
    return EVALUATOR_MARKER in system_text(request)


def user_texts(request: RecordedRequest) -> list[str]:
    """The text of every user message, in order."""
    return [content_text(m.get("content")) for m in request.messages if m.get("role") == "user"]


@dataclass
class Brain:
    """The scripted model's answers: turns speak back; evaluations answer from a script.

    ``evaluations`` is consumed one per evaluator request (default ``NONE``); an
    evaluation waits on ``evaluation_gate`` when one is set, holding the evaluator busy.
    ``turn_replies`` is consumed one per ordinary turn before ``speak`` answers.
    """

    model: ScriptedModel
    evaluations: list[str] = field(default_factory=list)
    evaluation_gate: asyncio.Event | None = None
    turn_replies: list[Reply] = field(default_factory=list)
    speak: Callable[[RecordedRequest], str] = lambda r: f"You said {r.last_user_text}."

    def __call__(self, request: RecordedRequest) -> Reply:
        if is_evaluation(request):
            text = self.evaluations.pop(0) if self.evaluations else "NONE"
            return Reply.say(text, gate=self.evaluation_gate)
        if self.turn_replies:
            return self.turn_replies.pop(0)
        return Reply.call("speak", {"text": self.speak(request)})

    @property
    def turns(self) -> list[RecordedRequest]:
        """The model requests of ordinary turns (evaluations left out)."""
        return [r for r in self.model.requests if not is_evaluation(r)]

    @property
    def evaluator_requests(self) -> list[RecordedRequest]:
        """The evaluator's model requests."""
        return [r for r in self.model.requests if is_evaluation(r)]


@pytest.fixture
async def brain() -> AsyncIterator[Brain]:
    """The scripted model server with a :class:`Brain` as its responder."""
    async with ScriptedModel() as model:
        mind = Brain(model)
        model.responder = mind
        yield mind


@pytest.fixture
async def jmfts(tmp_path: Path) -> AsyncIterator[RunningJmfts]:
    """A real JMFTS server on a free loopback port."""
    async with running_jmfts(tmp_path / "jmfts") as server:
        yield server


def reflex_spec(catalog: NodeCatalog, agent: str = AGENT, **config: Any) -> NodeSpec:
    """``agent.edge_asr_memory`` as the catalog ships it, renamed to ``agent`` and with
    ``config`` merged into the memory_reflex extension's config."""
    spec = catalog[NODE]
    extensions = tuple(
        replace(ext, config={**ext.config, **config}) if ext.name == "memory_reflex" else ext
        for ext in spec.extensions
    )
    return replace(spec, name=f"agent.{agent}", extensions=extensions)


@asynccontextmanager
async def memory_agent(
    spec: NodeSpec,
    *,
    nats_url: str,
    jmfts: RunningJmfts,
    token: str,
    brain: Brain,
    data_dir: Path,
    grammar: str | None = None,
) -> AsyncIterator[AgentNode]:
    """A running agent node whose τ loads the reflex, with its own JMFTS token.

    ``grammar`` declares the scripted model's decode-constraint dialect, as the
    embedded model's endpoint does (``gbnf``): the evaluator then takes its utterance form.
    Such an endpoint also forces the speak tool, as the embedded one can (forced-tool mode).
    """
    token_file = data_dir / f"{spec.agent}.token"
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text(token)
    token_file.chmod(0o600)
    async with AgentNode(
        spec,
        nats_url=nats_url,
        data_dir=data_dir,
        model=ModelEndpoint(
            base_url=brain.model.url,
            grammar=grammar,
            extra_body={"tool_choice": forced_tool_choice("speak")} if grammar else {},
        ),
        repo_root=REPO_ROOT,
        jmfts_url=jmfts.url,
        jmfts_token_file=token_file,
    ) as node:
        try:
            yield node
        finally:
            # Shown with a failing test's output: what the node saw and did.
            print(f"{spec.name} stats: {node.stats}")


@asynccontextmanager
async def edge_for(nats_url: str, agent: str = AGENT) -> AsyncIterator[EdgeSide]:
    """The edge's side of a turn for ``agent`` on device ``tui``."""
    nc = await nats.connect(nats_url)
    side = EdgeSide(nc=nc, agent=agent)
    await nc.subscribe("events.>", cb=side.on_event)
    await nc.flush()
    try:
        yield side
    finally:
        print(f"edge for {agent} saw {[e.subject for e in side.seen]}")
        await nc.drain()


async def until(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll ``predicate`` until it holds, within a timeout."""
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.02)


async def session_entries(node: AgentNode, custom_type: str) -> list[dict[str, Any]]:
    """The τ session's custom entries of one type, read over τ's RPC (get_tree, get_entry)."""
    tau = node._tau.current  # the test reads the session the node owns; nothing else needs this
    assert tau is not None
    tree = await tau.request("get_tree", {})
    found = []
    for row in tree["nodes"]:
        entry = (await tau.request("get_entry", {"entry_id": row["entry_id"]}))["entry"]
        if entry.get("type") == "customEntry" and entry.get("customType") == custom_type:
            found.append(entry)
    return found


Converse = Callable[..., AbstractAsyncContextManager[tuple[EdgeSide, AgentNode]]]


@pytest.fixture
def converse(nats_url: str, jmfts: RunningJmfts, brain: Brain, tmp_path: Path) -> Converse:
    """``converse(spec, token, grammar=None)``: the edge's side and a running memory agent."""

    @asynccontextmanager
    async def run(
        spec: NodeSpec, token: str, grammar: str | None = None
    ) -> AsyncIterator[tuple[EdgeSide, AgentNode]]:
        async with (
            edge_for(nats_url, spec.agent) as edge,
            memory_agent(
                spec,
                nats_url=nats_url,
                jmfts=jmfts,
                token=token,
                brain=brain,
                data_dir=tmp_path / "home",
                grammar=grammar,
            ) as node,
        ):
            yield edge, node

    return run
