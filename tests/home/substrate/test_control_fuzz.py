"""Fuzzing the control surface: any payload on ``home.control.<verb>`` is answered.

A real home (nats-server child and the substrate, in process). Whatever a local
client sends to a verb, it gets a reply: a result, or a refusal under one of the
named error codes, counted in ``status.control``; never ``internal``, never
silence, and ``ping`` is still answered right after. The slowest request is
reported (tests/support/fuzz_report.py), not asserted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from shared import control
from shared.control import ControlReply
from tests.home.substrate.conftest import Home
from tests.support import json_strategy
from tests.support.fuzz_report import Slowest, report

CONTROL = Slowest("control verbs")
CODES = {control.BAD_REQUEST, control.NOT_FOUND, control.REFUSED, control.OVERLAP}
REQUEST_TIMEOUT_S = 30.0


@pytest.fixture(scope="module", autouse=True)
def slowest_cases() -> Iterator[None]:
    yield
    report(CONTROL)


json_values = json_strategy.json_values(max_leaves=15)
yaml_texts = st.sampled_from(
    [
        "schema: x\nrequires: {nodes: [nobody]}\nbindings: []\n",
        "a: &a [1, 2]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n",
        "schema: [unclosed\n",
        "!!python/object:os.system\nargs: [true]\n",
        "schema: talk\nbindings: [{from: 'events.>', to: svc.echo}]\n",
    ]
) | st.text(max_size=120)
# Names no test schema or device has: a fuzzed request must never start real nodes.
names = st.sampled_from(["", "nope", "../etc", "UPPER", "a b", "x" * 300]) | json_values
arguments = st.fixed_dictionaries(
    {},
    optional={
        "name": names,
        "text": yaml_texts | json_values,
        "file": names,
        "allow_overlap": json_values,
        "device": names,
        "x": json_values,
    },
)
payloads = (
    arguments.map(lambda args: json.dumps(args).encode())
    | st.binary(max_size=100)
    | st.sampled_from([b"", b"[]", b"null", b"[" * 5000 + b"]" * 5000, b"\xff"])
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(control.VERBS), payloads)
# Once found at random: a name too long for a file name, and one that climbs out of
# the schema directory, are a named not_found like any unknown schema.
@example("schema.apply", json.dumps({"name": "x" * 300}).encode())
@example("schema.apply", json.dumps({"name": "../schemas/edge_asr"}).encode())
# Found at random too: once a device is paired, a device name too long for a file name
# was an internal error (examples run in this order, on one home).
@example("bridge.pair", json.dumps({"device": "nope"}).encode())
@example("bridge.pair", json.dumps({"device": "x" * 300}).encode())
async def test_every_control_payload_is_answered_or_refused_by_name(
    home: Home, verb: str, payload: bytes
) -> None:
    with CONTROL.timed((verb, payload)):
        raw = await home.nc.request(
            control.control_subject(verb), payload, timeout=REQUEST_TIMEOUT_S
        )
    reply = ControlReply.from_json(raw.data)
    assert reply.ok or reply.code in CODES, (verb, payload, reply)
    pong = ControlReply.from_json(
        (await home.nc.request(control.control_subject(control.PING), b"", timeout=10)).data
    )
    assert pong.ok


async def test_control_answers_are_counted_by_outcome(home: Home) -> None:
    for verb, payload in ((control.PING, b"{"), (control.SCHEMA_UNAPPLY, b"{}")):
        await home.nc.request(control.control_subject(verb), payload, timeout=10)
    await home.nc.request(control.control_subject(control.PING), b"", timeout=10)
    status = await home.request(control.STATUS)
    assert status["control"] == {control.BAD_REQUEST: 2, "ok": 1}


@pytest.mark.parametrize(
    "args",
    [{}, {"device": None}, {"device": 123}, {"device": "x" * 300}],
    ids=["no device", "null", "a number", "300 characters"],
)
async def test_bridge_pair_refuses_a_device_it_cannot_name(
    home: Home, args: dict[str, Any]
) -> None:
    """Before: no device paired one named 'none' (str(None)), a number one named '123', and
    a long name failed in the filesystem as an internal error."""
    raw = await home.nc.request(
        control.control_subject(control.BRIDGE_PAIR), json.dumps(args).encode(), timeout=30
    )
    reply = ControlReply.from_json(raw.data)
    assert (reply.ok, reply.code) == (False, control.BAD_REQUEST), reply
    assert not list((home.config.data_dir / "bridge").glob("*.edge.yaml"))
