"""Fuzzing the bridge's outside input: frames and hellos end in a named refusal or a value.

Whatever a paired but hostile board sends, the decoder and the hello check either
return what they parsed or raise FrameError / HelloRefused; nothing else escapes,
and a well-formed hello is still accepted afterwards. The slowest case of each
is reported (tests/support/fuzz_report.py), not asserted.
"""

from __future__ import annotations

import contextlib
import json
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bridge.errors import FrameError, HelloRefused
from bridge.protocol import FrameDecoder, FrameType, Hello, HelloFrame, Resume, check_hello
from shared.schema import BridgeHalf, load_bridge_half
from tests.support import json_strategy
from tests.support.fuzz_report import Slowest, report

EDGE = load_bridge_half("schemas/bridge/board.edge.yaml")
HOME = load_bridge_half("schemas/bridge/board.home.yaml")
GOOD_BODY = Hello.for_half(EDGE, "s", Resume(None, 0)).to_body()
FRAMES = Slowest("bridge frames")
HELLOS = Slowest("bridge hellos")


@pytest.fixture(scope="module", autouse=True)
def slowest_cases() -> Iterator[None]:
    yield
    report(FRAMES, HELLOS)


json_values = json_strategy.json_values(max_leaves=30, text_size=30, width=5)
subjects = st.lists(
    st.sampled_from(["events", "sensation", "board", "turn", "*", ">", "audio", "x", ""]),
    min_size=0,
    max_size=7,
).map(".".join)


def _accept_or_refuse(own: BridgeHalf, body: dict[str, Any]) -> None:
    with HELLOS.timed(body), contextlib.suppress(FrameError, HelloRefused):
        check_hello(own, Hello.from_body(body), "board")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([*FrameType, 0x00, 0x7F]), st.binary(max_size=600))
# Found by this suite's first runs: a body nested past the parser's recursion limit
# (RecursionError) and a 5,000-digit integer (ValueError), in either kind that holds JSON.
@example(FrameType.HELLO, b"[" * 5000 + b"]" * 5000)
@example(FrameType.REFUSE, b"[" * 5000 + b"]" * 5000)
@example(FrameType.HELLO, b'{"version": ' + b"9" * 5000 + b"}")
@example(FrameType.REFUSE, b'{"reason": ' + b"9" * 5000 + b"}")
def test_any_frame_body_decodes_or_is_a_frame_error(kind: int, body: bytes) -> None:
    try:
        with FRAMES.timed((kind, body)):
            frames = FrameDecoder().feed(struct.pack(">IB", len(body) + 1, kind) + body)
    except FrameError:
        return
    for frame in frames:
        if isinstance(frame, HelloFrame):
            _accept_or_refuse(HOME, frame.body)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([*GOOD_BODY, "x"]), json_values, max_size=12))
def test_any_hello_object_is_accepted_or_refused_by_name(changes: dict[str, Any]) -> None:
    _accept_or_refuse(HOME, GOOD_BODY | changes)
    check_hello(HOME, Hello.from_body(GOOD_BODY), "board")  # the next good hello still pairs


@settings(max_examples=300, deadline=None)
@given(st.lists(subjects, max_size=70), st.lists(subjects, max_size=70))
def test_any_declared_subjects_are_accepted_or_refused_by_name(
    exports: list[str], imports: list[str]
) -> None:
    _accept_or_refuse(HOME, GOOD_BODY | {"exports": exports, "imports": imports})


@pytest.mark.parametrize("kind", [FrameType.HELLO, FrameType.REFUSE])
def test_json_the_parser_cannot_take_is_a_frame_error(kind: FrameType) -> None:
    """Before: RecursionError (deep nesting) or ValueError (a 5,000-digit integer) out of
    FrameDecoder.feed, past the handshake's handlers."""
    body = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(FrameError, match="nests too deeply"):
        FrameDecoder().feed(struct.pack(">IB", len(body) + 1, kind) + body)
    digits = b'{"version": ' + b"9" * 5000 + b"}"
    with pytest.raises(FrameError, match="not UTF-8 JSON"):
        FrameDecoder().feed(struct.pack(">IB", len(digits) + 1, kind) + digits)
    ok = json.dumps(GOOD_BODY).encode()
    [frame] = FrameDecoder().feed(struct.pack(">IB", len(ok) + 1, FrameType.HELLO) + ok)
    assert isinstance(frame, HelloFrame)
