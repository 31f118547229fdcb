"""The agent node end to end: real nats-server, real τ, the real extensions, a scripted model.

Each test publishes utterances on ``events.workspace.edge_asr.in`` as the router
would, answers speak events as the edge would, and asserts on what crossed the
bus and what the (scripted) model was sent.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import nats
import pytest

from home.agents.agent_node import AgentNode
from home.agents.errors import RestartBudgetExhausted, TauExited
from home.llm.endpoint import ModelEndpoint
from home.tau_extensions.handset import NOTHING_SPEAKABLE
from home.tau_extensions.speakable import APOLOGY
from shared.event import Event, new_binding_id, utc_now
from shared.schema.catalog import NodeCatalog, NodeSpec, RestartPolicy
from tests.support.home_fixtures import REPO_ROOT, EdgeSide
from tests.support.scripted_model import (
    RecordedRequest,
    Reply,
    ScriptedModel,
    ToolCall,
    content_text,
)


def with_extension_config(spec: NodeSpec, name: str, **config: Any) -> NodeSpec:
    """``spec`` with ``config`` merged into one extension's config."""
    extensions = tuple(
        replace(ext, config={**ext.config, **config}) if ext.name == name else ext
        for ext in spec.extensions
    )
    return replace(spec, extensions=extensions)


@asynccontextmanager
async def running_node(
    spec: NodeSpec,
    nats_url: str,
    model: ScriptedModel,
    data_dir: Path,
    **kw: Any,
) -> AsyncIterator[AgentNode]:
    async with AgentNode(
        spec,
        nats_url=nats_url,
        data_dir=data_dir,
        model=ModelEndpoint(base_url=model.url),
        repo_root=REPO_ROOT,
        **kw,
    ) as node:
        yield node


async def until(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.02)


def speak_back(request: RecordedRequest) -> Reply:
    """A responder that speaks the user's words back."""
    return Reply.call("speak", {"text": f"You said {request.last_user_text}."})


def proc_file(pid: int, name: str) -> bytes:
    return Path(f"/proc/{pid}/{name}").read_bytes()


def tool_results(request: RecordedRequest) -> list[str]:
    return [content_text(m.get("content")) for m in request.messages if m.get("role") == "tool"]


async def test_full_turn_from_utterance_to_speech_ack(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.script(Reply.call("speak", {"text": "Yes, the kettle is on."}))
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        said = await edge.say("is the kettle on", received=lambda: node.stats.received)
        speaks = await edge.wait_for("speak.tui")
        await until(lambda: len(node.stats.outcomes) == 1)

    (speak,) = speaks
    assert speak.subject == "events.workspace.edge_asr.out.speak.tui"
    assert speak.event.payload["text"] == "Yes, the kettle is on."
    assert speak.event.binding_id == said.binding_id
    assert speak.event.source == "agent.edge_asr"
    (outcome,) = node.stats.outcomes
    # Completion is the agent_end of this submission; speak ended it as a terminal tool.
    assert outcome.end_reason == "terminate"
    assert outcome.binding_id == said.binding_id
    # One model request for one utterance; it carried the utterance and offered every verb.
    (request,) = model.requests
    assert request.last_user_text == "is the kettle on"
    assert sorted(request.tool_names) == ["delegate", "jmfts_write", "journal_append", "speak"]
    assert not any(name in request.tool_names for name in ("bash", "read", "write", "edit"))


async def test_unspeakable_answer_goes_to_the_reply_rail_and_is_reprompted_once(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.script(
        Reply.say("```python\nprint('the kettle is on')\n```"),
        Reply.call("speak", {"text": "The kettle is on."}),
    )
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        said = await edge.say("is the kettle on", received=lambda: node.stats.received)
        speaks = await edge.wait_for("speak.tui")
        await until(lambda: len(node.stats.outcomes) == 2)

    (refusal,) = [e for e in edge.on("reply.tui") if e.event.payload.get("kind") == "refusal"]
    assert refusal.event.payload["spoken"] is False
    assert refusal.event.payload["reason"] == "it contains a code block"
    assert refusal.event.binding_id == said.binding_id
    assert node.stats.reprompts == 1
    assert len(model.requests) == 2
    assert "could not be read aloud because it contains a code block" in (
        model.requests[1].last_user_text
    )
    assert [s.event.payload["text"] for s in speaks] == ["The kettle is on."]
    assert speaks[0].event.binding_id == said.binding_id


async def test_a_second_refusal_earns_no_second_reprompt_and_what_is_speakable_is_spoken(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.script(
        Reply.say("| kettle | on |\n| toaster | off |"),
        Reply.say("| kettle | on |\n| toaster | off |"),
    )
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        await edge.say("what is on", received=lambda: node.stats.received)
        await edge.wait_for("reply.tui")
        speaks = await edge.wait_for("speak.tui")
        await until(lambda: len(node.stats.outcomes) == 2)
        await asyncio.sleep(0.3)  # room for a wrong third prompt to show up

    assert node.stats.reprompts == 1
    assert len(model.requests) == 2
    assert len(edge.on("reply.tui")) == 1
    assert [s.event.payload["text"] for s in speaks] == ["kettle on toaster off"]


async def test_the_speak_tool_says_only_what_is_speakable_and_apologises_for_nothing(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.script(
        Reply.call("speak", {"text": "It&#39;s <b>on</b> 😀 #*#*#"}),
        Reply.call("speak", {"text": "#&#39;*n*m*r*h*t*"}),
        Reply.call("speak", {"text": "&lt;&gt; ### ***"}),
    )
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        await edge.say("is the kettle on", received=lambda: node.stats.received)
        await edge.wait_for("speak.tui")
        await edge.say("and the toaster", received=lambda: node.stats.received)
        speaks = await edge.wait_for("speak.tui", 2)
        await until(lambda: len(node.stats.outcomes) == 3)

    assert [s.event.payload["text"] for s in speaks] == ["It's on", APOLOGY]
    (refusal,) = edge.on("reply.tui")
    assert refusal.event.payload["reason"] == NOTHING_SPEAKABLE
    assert node.stats.reprompts == 1
    assert "could not be read aloud because nothing in it" in model.requests[2].last_user_text


async def test_status_lines_go_to_the_reply_rail_and_silence_is_a_valid_turn(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.script(
        Reply.call("delegate", {"text": "find my notes on kettles"}, text="Asking the operator."),
        Reply(),
    )
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        said = await edge.say("find my kettle notes", received=lambda: node.stats.received)
        await until(lambda: len(node.stats.outcomes) == 1)
        delegated = await edge.wait_for("delegate")

    (status,) = edge.on("reply.tui")
    assert status.event.payload == {
        "agent": "edge_asr",
        "text": "Asking the operator.",
        "spoken": False,
        "kind": "status",
    }
    assert delegated[0].event.payload["text"] == "find my notes on kettles"
    assert delegated[0].event.binding_id == said.binding_id
    assert edge.on("speak") == []
    assert node.stats.outcomes[0].end_reason == "done"
    assert node.stats.reprompts == 0


async def test_no_speech_ack_within_the_timeout_is_a_tool_error_the_model_reads(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    edge.ack_speech = False
    spec = with_extension_config(catalog["agent.edge_asr"], "handset", ack_timeout_s=0.5)
    model.script(Reply.call("speak", {"text": "It is on."}), Reply())
    async with running_node(spec, nats_url, model, tmp_path) as node:
        said = await edge.say("is the kettle on", received=lambda: node.stats.received)
        await until(lambda: len(node.stats.outcomes) == 1)

    assert len(edge.on("speak.tui")) == 1
    assert len(model.requests) == 2, "the failed speak must go back to the model"
    (result,) = tool_results(model.requests[1])
    assert f"no ack on events.action.speech.completed.{said.binding_id}" in result
    assert node.stats.outcomes[0].end_reason == "done"


async def test_two_quick_utterances_are_both_answered_in_order(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    model.script(Reply.call("speak", {"text": "First answer."}, gate=gate))
    model.responder = speak_back
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        first = await edge.say("first question", received=lambda: node.stats.received)
        await model.wait_requests(1)
        # The second arrives while the first turn is in flight.
        second = await edge.say("second question", received=lambda: node.stats.received)
        await until(lambda: node.queued == 1)
        gate.set()
        speaks = await edge.wait_for("speak.tui", 2)
        await until(lambda: len(node.stats.outcomes) == 2)

    assert [s.event.payload["text"] for s in speaks] == [
        "First answer.",
        "You said second question.",
    ]
    assert [s.event.binding_id for s in speaks] == [first.binding_id, second.binding_id]
    assert [r.last_user_text for r in model.requests] == ["first question", "second question"]
    assert [o.end_reason for o in node.stats.outcomes] == ["terminate", "terminate"]


@asynccontextmanager
async def silent_board(nats_url: str) -> AsyncIterator[EdgeSide]:
    """A second board, ``board``, that hears speak events and never acks them."""
    silent = EdgeSide(nc=await nats.connect(nats_url), agent="edge_asr", device="board")
    silent.ack_speech = False
    await silent.nc.subscribe("events.>", cb=silent.on_event)
    try:
        yield silent
    finally:
        await silent.nc.drain()


def speak_once(request: RecordedRequest) -> Reply:
    """Speak the user's words back; after a failed speak, end the turn silently."""
    return Reply() if request.messages[-1].get("role") == "tool" else speak_back(request)


async def test_a_board_that_never_acks_cannot_push_another_boards_turns_past_their_ttl(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.responder = speak_once
    # Each of the silent board's turns waits the whole ack timeout: four of them in a
    # row outlast the other board's TTL when turns are taken in arrival order.
    spec = with_extension_config(catalog["agent.edge_asr"], "handset", ack_timeout_s=2.0)
    async with (
        silent_board(nats_url) as silent,
        running_node(spec, nats_url, model, tmp_path) as node,
    ):
        for n in range(4):
            await silent.say(f"board question {n}", received=lambda: node.stats.received)
        heard = [
            await edge.say(f"tui question {n}", ttl_ms=5000, received=lambda: node.stats.received)
            for n in range(2)
        ]
        answers = await edge.wait_for("speak.tui", 2, timeout_s=30)
        answered_at = utc_now()
        await until(lambda: len(node.stats.outcomes) == 6)

    assert [a.event.binding_id for a in answers] == [h.binding_id for h in heard]
    assert all(answered_at < h.expires_at for h in heard), "answered past the TTL"
    assert node.stats.stale == 0
    prompts = [r.last_user_text for r in model.requests if r.messages[-1].get("role") == "user"]
    assert prompts[:3] == ["board question 0", "tui question 0", "tui question 1"]
    assert node.stats.unacked_speech == 4


async def test_a_turn_speaking_to_a_silent_board_gives_way_to_a_waiting_device(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.responder = speak_back  # retries its speak for ever: only the wall clock ends it
    spec = with_extension_config(catalog["agent.edge_asr"], "handset", ack_timeout_s=1.0)
    async with (
        silent_board(nats_url) as silent,
        running_node(spec, nats_url, model, tmp_path, wall_clock_s=60.0) as node,
    ):
        held = await silent.say("board question", received=lambda: node.stats.received)
        await model.wait_requests(1)
        heard = await edge.say("tui question", ttl_ms=5000, received=lambda: node.stats.received)
        (answer,) = await edge.wait_for("speak.tui", 1, timeout_s=30)
        answered_at = utc_now()
        await until(lambda: len(node.stats.outcomes) == 2)
        (aborted,) = await silent.wait_for("reply.board")

    assert answer.event.binding_id == heard.binding_id
    assert answered_at < heard.expires_at, "answered past the TTL"
    assert node.stats.yielded == 1
    assert aborted.event.binding_id == held.binding_id
    assert aborted.event.payload["kind"] == "aborted"
    assert "device board is not acknowledging speech" in aborted.event.payload["reason"]


async def test_a_turn_over_the_wall_clock_is_aborted_and_reported(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    never = asyncio.Event()
    model.script(Reply.call("speak", {"text": "Too late."}, gate=never))
    model.responder = speak_back
    try:
        async with running_node(
            catalog["agent.edge_asr"], nats_url, model, tmp_path, wall_clock_s=5.0
        ) as node:
            slow = await edge.say("a slow question", received=lambda: node.stats.received)
            await until(lambda: len(node.stats.outcomes) == 1)
            await edge.say("a quick one", received=lambda: node.stats.received)
            speaks = await edge.wait_for("speak.tui")
            await until(lambda: len(node.stats.outcomes) == 2)
    finally:
        never.set()

    assert node.stats.outcomes[0].end_reason == "aborted"
    assert node.stats.aborted == 1
    (report,) = [e for e in edge.on("reply.tui") if e.event.payload.get("kind") == "aborted"]
    assert report.event.binding_id == slow.binding_id
    assert "longer than 5s" in report.event.payload["reason"]
    # The process was interrupted, not replaced, and took the next turn.
    assert node.stats.restarts == 0
    assert [s.event.payload["text"] for s in speaks] == ["You said a quick one."]


async def test_kill_9_of_tau_mid_turn_restarts_it_and_the_utterance_is_answered(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    stuck = asyncio.Event()
    model.script(Reply.call("speak", {"text": "Never sent."}, gate=stuck))
    model.responder = speak_back
    try:
        async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
            said = await edge.say("are you there", received=lambda: node.stats.received)
            await model.wait_requests(1)
            first_pid = node.tau_pid
            assert first_pid is not None
            os.kill(first_pid, signal.SIGKILL)
            speaks = await edge.wait_for("speak.tui")
            await until(lambda: len(node.stats.outcomes) == 1)
            second_pid = node.tau_pid
            # The restarted process takes new turns too.
            await edge.say("still there", received=lambda: node.stats.received)
            speaks = await edge.wait_for("speak.tui", 2)
    finally:
        stuck.set()

    assert second_pid not in (None, first_pid)
    assert node.stats.restarts == 1
    assert node.stats.redelivered == 1
    assert speaks[0].event.binding_id == said.binding_id
    assert speaks[0].event.payload["text"] == "You said are you there."
    assert speaks[1].event.payload["text"] == "You said still there."


async def test_a_request_to_a_killed_tau_leaves_it_known_dead_and_the_next_turn_answered(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    # SIGKILL closes τ's pipes at once, but the node learns of the death only when its
    # reader sees the end of τ's output and the process is reaped. A request that breaks
    # the pipe first must leave τ known dead, or a turn would be redelivered to the same
    # dead τ and reported "died twice" instead of answered by a new one. (Here the reaping
    # thread usually wins during the sleep, so this also passes without that wait.)
    model.responder = speak_back
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        await edge.say("are you there", received=lambda: node.stats.received)
        await edge.wait_for("speak.tui")
        await until(lambda: len(node.stats.outcomes) == 1)  # the turn is over, not just spoken
        tau = node._tau.current
        assert tau is not None and tau.pid is not None
        os.kill(tau.pid, signal.SIGKILL)
        # Blocks the loop on purpose: τ is gone, and nothing in the node has run since.
        time.sleep(0.5)  # noqa: ASYNC251
        assert not tau.exited.is_set()
        with pytest.raises(TauExited):
            await tau.request("get_state")
        assert tau.exited.is_set()
        said = await edge.say("still there", received=lambda: node.stats.received)
        speaks = await edge.wait_for("speak.tui", 2)

    assert node.stats.failed == 0
    texts = [s.event.payload["text"] for s in speaks]
    assert texts == ["You said are you there.", "You said still there."]
    assert speaks[1].event.binding_id == said.binding_id


async def test_malformed_inbound_events_are_counted_and_the_node_carries_on(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.responder = speak_back
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        hello = await edge.say("hello", received=lambda: node.stats.received)
        blank = await edge.say("   ", received=lambda: node.stats.received)
        before = node.stats.received
        await edge.nc.publish("events.workspace.edge_asr.in", b"{not json")
        await edge.nc.publish("events.workspace.edge_asr.in", b'{"event_type": "x"}')
        await edge.nc.publish("events.workspace.edge_asr.in", hello.to_json())
        await until(lambda: node.stats.received == before + 3)
        speaks = await edge.wait_for("speak.tui")
        await until(lambda: len(node.stats.outcomes) == 1)

    assert blank.binding_id != hello.binding_id
    assert node.stats.invalid == 3
    assert node.stats.duplicates >= 1
    assert [s.event.payload["text"] for s in speaks] == ["You said hello."]
    assert len(model.requests) == 1


async def test_the_token_never_reaches_the_model_or_the_bus(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    token = "tok-" + os.urandom(16).hex()
    token_file = tmp_path / "edge_asr.token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    spec = with_extension_config(catalog["agent.edge_asr"], "verbs", ack_timeout_s=0.5)
    model.script(
        Reply.call("journal_append", {"text": "asked about the kettle"}),
        Reply.call("jmfts_write", {"text": "kettle: on", "title": "kettle"}),
        Reply.call("speak", {"text": "Noted."}),
    )
    async with running_node(
        spec,
        nats_url,
        model,
        tmp_path,
        jmfts_url="http://127.0.0.1:9",
        jmfts_token_file=token_file,
    ) as node:
        await edge.say("remember the kettle is on", received=lambda: node.stats.received)
        await until(lambda: len(node.stats.outcomes) == 1)
        pid = node.tau_pid
        assert pid is not None
        cmdline, environ = proc_file(pid, "cmdline"), proc_file(pid, "environ")

    assert len(model.requests) == 3
    for request in model.requests:
        assert token.encode() not in request.raw
    assert token.encode() not in edge.all_raw()
    assert token.encode() not in cmdline
    assert token.encode() not in environ
    # No effector answered here, so both verbs came back to the model as tool errors.
    errors = tool_results(model.requests[2])
    assert any("no ack on events.journal.append." in e for e in errors)
    assert any("no ack on events.journal.jmfts_write." in e for e in errors)


async def test_the_node_gives_up_when_its_restart_policy_is_spent(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, tmp_path: Path
) -> None:
    spec = replace(
        catalog["agent.edge_asr"],
        restart_policy=RestartPolicy(max_restarts=1, window_s=60, backoff_s=0.1),
    )
    async with running_node(spec, nats_url, model, tmp_path) as node:
        watcher = asyncio.create_task(node.wait_failed())
        for _ in range(2):
            pid = node.tau_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            # Dead while idle: restarted at once the first time, given up on the second.
            await until(lambda pid=pid: node.tau_pid not in (None, pid) or watcher.done())
        failure = await asyncio.wait_for(watcher, 60)
    assert isinstance(failure, RestartBudgetExhausted)
    assert node.stats.restarts == 1


async def test_a_model_error_fails_the_turn_is_reported_and_the_next_turn_runs(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.script(Reply(status=400))
    model.responder = speak_back
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        broken = await edge.say("first", received=lambda: node.stats.received)
        await until(lambda: len(node.stats.outcomes) == 1)
        await edge.say("second", received=lambda: node.stats.received)
        speaks = await edge.wait_for("speak.tui")

    assert node.stats.outcomes[0].end_reason == "error"
    assert node.stats.failed == 1
    (report,) = [e for e in edge.on("reply.tui") if e.event.payload.get("kind") == "failed"]
    assert report.event.binding_id == broken.binding_id
    assert report.event.payload["spoken"] is False and report.event.payload["reason"]
    assert [s.event.payload["text"] for s in speaks] == ["You said second."]


async def test_an_agent_without_a_handset_answers_a_delegated_task_to_its_asker(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.script(Reply.say("Your kettle note is from Monday."))
    # Without its memory tools the operator needs no JMFTS, so it takes the task.
    operator = catalog["agent.jmfts_operator"]
    operator = replace(
        operator, extensions=tuple(e for e in operator.extensions if e.name == "verbs")
    )
    async with running_node(operator, nats_url, model, tmp_path) as node:
        asked = Event.new(
            "delegate",
            {"agent": "edge_asr", "text": "when is my kettle note from", "device": "tui"},
            source="agent.edge_asr",
            sequence_number=1,
            binding_id=new_binding_id(),
        )
        async with asyncio.timeout(60):
            while node.stats.received == 0:
                await edge.nc.publish("events.workspace.jmfts_operator.in", asked.to_json())
                await asyncio.sleep(0.3)
        await until(lambda: len(node.stats.outcomes) == 1)
        await until(lambda: any(".jmfts_operator.out.answer." in e.subject for e in edge.seen))

    (ack,) = [e for e in edge.seen if e.subject == f"events.journal.delegate.{asked.binding_id}"]
    assert ack.event.payload["ok"] is True
    (answer,) = [
        e for e in edge.seen if e.subject == "events.workspace.jmfts_operator.out.answer.edge_asr"
    ]
    assert answer.event.binding_id == asked.binding_id
    assert answer.event.payload == {
        "operator": "jmfts_operator",
        "question": "when is my kettle note from",
        "asker": "edge_asr",
        "device": "tui",
        "ok": True,
        "text": "Your kettle note is from Monday.",
        "error": None,
    }
    assert not [e for e in edge.seen if ".jmfts_operator.out.reply." in e.subject]
    assert sorted(model.requests[0].tool_names) == ["jmfts_write", "journal_append"]


async def test_a_prose_answer_whose_speech_is_never_acked_is_reported(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    edge.ack_speech = False
    spec = with_extension_config(catalog["agent.edge_asr"], "handset", ack_timeout_s=0.5)
    model.script(Reply.say("The kettle is on."))
    async with running_node(spec, nats_url, model, tmp_path) as node:
        said = await edge.say("is the kettle on", received=lambda: node.stats.received)
        await until(lambda: len(node.stats.outcomes) == 1)
        failed = await edge.wait_for("reply.tui")

    assert [s.event.payload["text"] for s in edge.on("speak.tui")] == ["The kettle is on."]
    assert failed[0].event.payload["kind"] == "failed"
    assert failed[0].event.binding_id == said.binding_id
    assert "no ack on events.action.speech.completed." in failed[0].event.payload["reason"]
    assert node.stats.reprompts == 0


async def test_the_first_sentence_is_spoken_while_the_model_still_writes_the_rest(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    # The model writes nothing past its first sentence until that sentence was spoken:
    # a handset that waited for the whole answer would wait for ever.
    first_spoken = asyncio.Event()
    model.script(
        Reply.written(
            "The kettle is on. ", "It has been on ", "for ten minutes.", hold=first_spoken
        )
    )
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        said = await edge.say("is the kettle on", received=lambda: node.stats.received)
        (first,) = await edge.wait_for("speak.tui", timeout_s=30)
        outcomes_when_first_spoken = len(node.stats.outcomes)
        first_spoken.set()
        await until(lambda: len(node.stats.outcomes) == 1)

    assert outcomes_when_first_spoken == 0
    speaks = edge.on("speak.tui")
    assert [s.event.payload["text"] for s in speaks] == [
        "The kettle is on.",
        "It has been on for ten minutes.",
    ]
    assert [s.event.payload.get("more") for s in speaks] == [True, None]  # a part follows
    assert first.event.binding_id == said.binding_id
    assert all(s.event.binding_id == said.binding_id for s in speaks)
    assert not edge.on("reply.tui")
    assert node.stats.reprompts == 0


async def test_a_long_first_clause_is_spoken_before_its_sentence_ends(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    first_spoken = asyncio.Event()
    model.script(
        Reply.written(
            "The kettle has been on, ", "so the water should be ", "hot by now.", hold=first_spoken
        )
    )
    spec = with_extension_config(catalog["agent.edge_asr"], "handset", first_clause_words=4)
    async with running_node(spec, nats_url, model, tmp_path) as node:
        await edge.say("is the kettle on", received=lambda: node.stats.received)
        await edge.wait_for("speak.tui", timeout_s=30)
        first_spoken.set()
        await until(lambda: len(node.stats.outcomes) == 1)

    speaks = edge.on("speak.tui")
    assert [s.event.payload["text"] for s in speaks] == [
        "The kettle has been on,",
        "so the water should be hot by now.",
    ]
    assert [s.event.payload.get("more") for s in speaks] == [True, None]


async def test_a_first_sentence_spoken_before_the_message_calls_a_tool_is_still_acked(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    # The stream held a whole sentence, so it was spoken; then the message called a
    # tool, which makes its prose a status line. The tool's answer is spoken after it.
    model.script(
        Reply(
            text="Let me look at the kettle for you. One moment.",
            parts=("Let me look at the kettle for you. ", "One moment."),
            tool_calls=[ToolCall("speak", {"text": "The kettle is on."})],
        ),
        Reply(),
    )
    async with running_node(catalog["agent.edge_asr"], nats_url, model, tmp_path) as node:
        said = await edge.say("is the kettle on", received=lambda: node.stats.received)
        await until(lambda: len(node.stats.outcomes) == 1)
        (status,) = await edge.wait_for("reply.tui")

    speaks = edge.on("speak.tui")
    assert [s.event.payload["text"] for s in speaks] == [
        "Let me look at the kettle for you.",
        "The kettle is on.",
    ]
    assert speaks[0].event.payload.get("more") is True
    assert all(s.event.binding_id == said.binding_id for s in speaks)
    assert status.event.payload["kind"] == "status"
    assert [o.error for o in node.stats.outcomes] == [None]
    assert node.stats.failed == 0 and node.stats.reprompts == 0


async def test_with_first_sentence_off_the_answer_is_spoken_whole_once_it_ends(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    spec = with_extension_config(catalog["agent.edge_asr"], "handset", first_sentence=False)
    model.script(Reply.written("The kettle is on. ", "It has been on for ten minutes."))
    async with running_node(spec, nats_url, model, tmp_path) as node:
        await edge.say("is the kettle on", received=lambda: node.stats.received)
        await until(lambda: len(node.stats.outcomes) == 1)

    assert [s.event.payload["text"] for s in edge.on("speak.tui")] == [
        "The kettle is on. It has been on for ten minutes."
    ]


async def test_each_part_is_filtered_and_a_silent_ack_of_the_rest_is_reported(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    edge.ack_speech = False
    spec = with_extension_config(catalog["agent.edge_asr"], "handset", ack_timeout_s=0.5)
    model.script(Reply.written("It&#39;s **on**. ", "Since ten *minutes* &amp; more."))
    async with running_node(spec, nats_url, model, tmp_path) as node:
        await edge.say("is the kettle on", received=lambda: node.stats.received)
        await until(lambda: len(node.stats.outcomes) == 1)
        failed = await edge.wait_for("reply.tui")

    assert [s.event.payload["text"] for s in edge.on("speak.tui")] == [
        "It's on.",
        "Since ten minutes & more.",
    ]
    assert failed[0].event.payload["kind"] == "failed"
    assert "no ack on events.action.speech.completed." in failed[0].event.payload["reason"]
