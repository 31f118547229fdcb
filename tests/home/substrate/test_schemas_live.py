"""Schemas at run time against a real nats-server and real node processes."""

from __future__ import annotations

import os
import signal

import pytest
from nats.aio.msg import Msg

from shared import control
from shared.control import StatusChange
from shared.errors import ControlError
from tests.home.substrate.conftest import Home, alive, nodes, running_pid, wait_for


async def test_apply_and_unapply_ref_count_the_nodes(home: Home) -> None:
    talk = await home.request(control.SCHEMA_APPLY, name="talk")
    assert talk["name"] == "talk" and talk["nodes"] == ["svc.echo", "svc.journal"]
    echo_pid = await running_pid(home, "svc.echo")
    journal_pid = await running_pid(home, "svc.journal")

    await home.request(control.SCHEMA_APPLY, name="notes")
    status = await home.request(control.STATUS)
    assert status["node_refs"]["svc.journal"] == ["notes", "talk"]
    assert await running_pid(home, "svc.journal") == journal_pid  # not started twice

    await home.request(control.SCHEMA_UNAPPLY, name="talk")
    await wait_for(lambda: _gone(echo_pid), "svc.echo to stop once no schema needs it")
    assert await running_pid(home, "svc.journal") == journal_pid  # still needed by notes
    assert [s["name"] for s in await home.request(control.SCHEMA_LIST)] == ["notes"]

    await home.request(control.SCHEMA_UNAPPLY, name="notes")
    await wait_for(lambda: _gone(journal_pid), "svc.journal to stop with its last schema")
    assert await nodes(home) == {}
    assert await home.request(control.SCHEMA_LIST) == []


async def _gone(pid: int) -> bool:
    return not alive(pid)


async def test_overlap_is_refused_naming_both_schemas_and_the_rail(home: Home) -> None:
    await home.request(control.SCHEMA_APPLY, name="talk")
    with pytest.raises(ControlError) as refused:
        await home.request(control.SCHEMA_APPLY, name="rival")
    assert refused.value.code == control.OVERLAP
    message = refused.value.message
    assert "'rival'" in message and "'talk'" in message
    assert "events.workspace.*.out.>" in message
    assert "svc.other" in message and "svc.echo" in message
    assert [s["name"] for s in await home.request(control.SCHEMA_LIST)] == ["talk"]
    assert "svc.other" not in await nodes(home)

    forced = await home.request(control.SCHEMA_APPLY, name="rival", allow_overlap=True)
    assert forced["allow_overlap"] is True
    await running_pid(home, "svc.other")


async def test_bad_requests_are_refused_clearly(home: Home) -> None:
    with pytest.raises(
        ControlError, match=r"no activation schema named 'nope'.*known: broken, ghost"
    ):
        await home.request(control.SCHEMA_APPLY, name="nope")
    with pytest.raises(ControlError, match="'talk' is not active") as inactive:
        await home.request(control.SCHEMA_UNAPPLY, name="talk")
    assert inactive.value.code == control.NOT_FOUND
    bad = "schema: broken\nrequires:\n  nodes: [svc.missing]\nbindings: []\n"
    with pytest.raises(ControlError) as error:
        await home.request(control.SCHEMA_APPLY, file="/x/broken.yaml", text=bad)
    assert error.value.code == control.BAD_REQUEST
    assert "/x/broken.yaml:3" in error.value.message and "svc.missing" in error.value.message
    await home.request(control.SCHEMA_APPLY, name="notes")
    with pytest.raises(ControlError, match="already active"):
        await home.request(control.SCHEMA_APPLY, name="notes")


async def test_a_schema_needing_a_board_node_is_refused_not_faked(home: Home) -> None:
    with pytest.raises(ControlError, match=r"edge\.ghost, which runs on edge") as error:
        await home.request(control.SCHEMA_APPLY, name="ghost")
    assert error.value.code == "refused"
    assert "edge.ghost" not in await nodes(home)


async def test_sigkill_beyond_policy_degrades_then_restores(home: Home) -> None:
    changes: list[StatusChange] = []

    async def record(msg: Msg) -> None:
        changes.append(StatusChange.from_json(msg.data))

    await home.nc.subscribe("home.status.schema.talk", cb=record)
    await home.nc.flush()
    await home.request(control.SCHEMA_APPLY, name="talk")
    first = await running_pid(home, "svc.echo")

    # max_restarts is 1: the first kill is within policy and the node comes back...
    os.kill(first, signal.SIGKILL)
    await wait_for(lambda: _restarted(home, first), "svc.echo to restart after one SIGKILL")
    states = [c.state for c in changes]
    assert "degraded" not in states

    # ...the second in the window exceeds it: the schema degrades, then restores.
    second = await running_pid(home, "svc.echo")
    os.kill(second, signal.SIGKILL)

    async def restored() -> bool:
        states = [c.state for c in changes]
        return (
            "degraded" in states
            and states[-1] == "active"
            and states.index("degraded") < len(states) - 1
        )

    await wait_for(restored, "the schema to degrade and then be restored")
    degraded = next(c for c in changes if c.state == "degraded")
    assert (degraded.kind, degraded.name) == ("schema", "talk")
    assert "svc.echo failed" in degraded.reason
    assert "exceeded restart policy" in degraded.reason
    third = await running_pid(home, "svc.echo")
    assert third not in (first, second)
    node = (await nodes(home))["svc.echo"]
    assert node["restarts"] == 2
    assert "exited with code -9" in (node["last_error"] or "")
    listed = {s["name"]: s for s in await home.request(control.SCHEMA_LIST)}
    assert listed["talk"]["state"] == "active"


async def _restarted(home: Home, old_pid: int) -> bool:
    node = (await nodes(home))["svc.echo"]
    return node["state"] == "running" and node["pid"] not in (None, old_pid)


async def test_a_node_that_never_answers_its_health_check_fails_its_schema(home: Home) -> None:
    await home.request(control.SCHEMA_APPLY, name="mute")

    async def failed() -> bool:
        return (await nodes(home))["svc.mute"]["state"] == "failed"

    await wait_for(failed, "svc.mute to exceed its restart policy")
    node = (await nodes(home))["svc.mute"]
    assert "not healthy within 0.3 s" in node["reason"]
    assert "no answer on home.test.nobody.answers" in node["reason"]
    listed = await home.request(control.SCHEMA_LIST)
    assert listed[0]["state"] == "degraded" and "svc.mute failed" in listed[0]["reason"]


async def test_a_node_with_a_bad_config_is_reported_with_the_key(home: Home) -> None:
    applied = await home.request(control.SCHEMA_APPLY, name="broken")

    async def failed() -> bool:
        return (await nodes(home))["svc.broken"]["state"] == "failed"

    await wait_for(failed, "svc.broken to fail")
    reason = (await nodes(home))["svc.broken"]["reason"]
    assert "config.command must be a non-empty list of strings" in reason
    assert applied["name"] == "broken"
