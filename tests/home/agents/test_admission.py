"""The agent node's admission policy: every ruling, in the orders the bus can deliver them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from home.agents.admission import (
    DUPLICATE,
    INVALID,
    MAX_DELIVERIES,
    STALE,
    Admission,
    Admit,
    Arrival,
    Ending,
    PendingTurn,
    Refuse,
    Unheard,
    abort_reason,
    judge_end,
    may_redeliver,
    outlived,
)
from home.agents.protocol import WireEvent
from home.tau_extensions.prose import rewrite_request

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=30)


def arrival(
    event_id: str = "e1",
    *,
    binding_id: str | None = None,
    device: str | None = "tui",
    expires_at: datetime = NOW + TTL,
    text: str = "is the kettle on",
) -> Arrival:
    return Arrival(
        text=text,
        binding_id=binding_id or f"b-{event_id}",
        device=device,
        event_id=event_id,
        schema="voice",
        subject="events.workspace.edge_asr.in",
        expires_at=expires_at,
        received_at=1.0,
    )


def admitted(ruling: Admit | Refuse) -> PendingTurn:
    assert isinstance(ruling, Admit), ruling
    return ruling.turn


# --- arrival -------------------------------------------------------------------


def test_an_utterance_is_admitted_as_a_numbered_turn_of_its_device() -> None:
    admission = Admission()
    first = admitted(admission.arrive(arrival("e1"), NOW))
    second = admitted(admission.arrive(arrival("e2", device="board"), NOW))
    assert (first.binding.binding_id, first.binding.device, first.binding.turn) == (
        "b-e1",
        "tui",
        1,
    )
    assert (second.binding.device, second.binding.turn) == ("board", 2)
    assert first.binding.schema == "voice" and not first.binding.reprompt
    assert first.correlation == {
        "subject": "events.workspace.edge_asr.in",
        "binding_id": "b-e1",
        "event_id": "e1",
    }
    assert (first.text, first.received_at, first.expires_at) == ("is the kettle on", 1.0, NOW + TTL)
    assert first.deliveries == 0 and first.msg is None
    assert len(admission) == 2


def test_a_second_copy_of_an_event_is_a_duplicate_acked_and_not_queued() -> None:
    admission = Admission()
    admitted(admission.arrive(arrival("e1"), NOW))
    assert admission.arrive(arrival("e1"), NOW) == DUPLICATE
    assert DUPLICATE.settle == "ack"
    assert len(admission) == 1


def test_a_duplicate_is_refused_as_such_even_after_its_turn_ran() -> None:
    admission = Admission()
    admitted(admission.arrive(arrival("e1"), NOW))
    admission.begin()
    admission.end()
    assert admission.arrive(arrival("e1"), NOW) == DUPLICATE


def test_an_utterance_past_its_ttl_is_stale_and_terminated() -> None:
    admission = Admission()
    assert admission.arrive(arrival("e1", expires_at=NOW - timedelta(microseconds=1)), NOW) == STALE
    assert STALE.settle == "term" and INVALID.settle == "term"
    assert len(admission) == 0


def test_an_utterance_at_exactly_its_expiry_is_still_admitted() -> None:
    admitted(Admission().arrive(arrival("e1", expires_at=NOW), NOW))


def test_a_stale_copy_does_not_make_a_later_fresh_copy_a_duplicate() -> None:
    # Clocks disagree: a redelivery judged stale leaves no mark behind.
    admission = Admission()
    late = NOW + TTL + timedelta(seconds=1)
    assert admission.arrive(arrival("e1"), late) == STALE
    turn = admitted(admission.arrive(arrival("e1"), NOW))
    assert turn.binding.turn == 1


def test_a_duplicate_past_its_ttl_is_counted_as_a_duplicate() -> None:
    admission = Admission()
    admitted(admission.arrive(arrival("e1"), NOW))
    assert admission.arrive(arrival("e1"), NOW + 2 * TTL) == DUPLICATE


def test_event_ids_are_forgotten_beyond_the_dedup_window() -> None:
    admission = Admission(dedup_window=2)
    for event_id in ("e1", "e2", "e3"):
        admitted(admission.arrive(arrival(event_id), NOW))
    assert admission.arrive(arrival("e3"), NOW) == DUPLICATE
    assert admission.arrive(arrival("e2"), NOW) == DUPLICATE
    admitted(admission.arrive(arrival("e1"), NOW))


# --- departure -----------------------------------------------------------------


def test_begin_takes_the_next_turn_as_the_one_in_flight_and_end_clears_it() -> None:
    admission = Admission()
    with pytest.raises(IndexError):
        admission.begin()
    turn = admitted(admission.arrive(arrival("e1"), NOW))
    assert admission.begin() is turn and admission.current is turn
    assert len(admission) == 0
    admission.end()
    assert admission.current is None


def test_turns_are_taken_round_robin_across_devices() -> None:
    admission = Admission()
    for event_id, device in (("e1", "board"), ("e2", "board"), ("e3", "tui"), ("e4", None)):
        admitted(admission.arrive(arrival(event_id, device=device), NOW))
    taken = [admission.begin().binding.event_id for _ in range(4)]
    assert taken == ["e1", "e3", "e4", "e2"]


def test_a_turn_outlives_its_ttl_only_strictly_after_expiry_and_a_reprompt_never() -> None:
    admission = Admission()
    turn = admitted(admission.arrive(arrival("e1"), NOW))
    assert outlived(turn, NOW + TTL) is None
    assert outlived(turn, NOW + TTL + timedelta(microseconds=1)) == NOW + TTL
    reprompt = admission.refused("b-e1", "it was a table", 2.0)
    assert reprompt is not None
    assert outlived(reprompt.turn, NOW + 100 * TTL) is None


# --- yielding ------------------------------------------------------------------


def _silent_board_in_flight(admission: Admission) -> PendingTurn:
    turn = admitted(admission.arrive(arrival("e1", device="board"), NOW))
    assert admission.speak_seen("b-e1") == "b-e1"
    admission.begin()
    return turn


def test_nothing_yields_with_no_turn_in_flight() -> None:
    admission = Admission()
    admitted(admission.arrive(arrival("e1", device="board"), NOW))
    admission.speak_seen("b-e1")
    assert admission.speech_unheard("b-e1") == Unheard("board", newly=True, supersede=False)
    assert not admission.should_yield()


def test_a_silent_devices_turn_yields_when_another_device_waits() -> None:
    admission = Admission()
    _silent_board_in_flight(admission)
    assert admission.speech_unheard("b-e1") == Unheard("board", newly=True, supersede=False)
    assert not admission.should_yield()  # nobody else waits
    ruling = admission.arrive(arrival("e2", device="tui"), NOW)
    assert isinstance(ruling, Admit) and ruling.supersede
    assert admission.should_yield()


def test_the_silence_may_be_noticed_after_the_other_device_queued() -> None:
    admission = Admission()
    _silent_board_in_flight(admission)
    ruling = admission.arrive(arrival("e2", device="tui"), NOW)
    assert isinstance(ruling, Admit) and not ruling.supersede
    assert admission.speech_unheard("b-e1") == Unheard("board", newly=True, supersede=True)


def test_a_silent_devices_own_next_turn_does_not_make_it_yield() -> None:
    admission = Admission()
    _silent_board_in_flight(admission)
    admission.speech_unheard("b-e1")
    ruling = admission.arrive(arrival("e2", device="board"), NOW)
    assert isinstance(ruling, Admit) and not ruling.supersede


def test_no_yield_to_a_device_that_is_silent_too() -> None:
    admission = Admission()
    admitted(admission.arrive(arrival("e0", device="tui"), NOW))
    admission.speak_seen("b-e0")
    admission.begin()
    admission.end()
    assert admission.speech_unheard("b-e0") == Unheard("tui", newly=True, supersede=False)
    _silent_board_in_flight(admission)
    admission.speech_unheard("b-e1")
    ruling = admission.arrive(arrival("e2", device="tui"), NOW)
    assert isinstance(ruling, Admit) and not ruling.supersede


def test_a_late_ack_after_the_turn_ended_makes_the_device_responsive_again() -> None:
    admission = Admission()
    _silent_board_in_flight(admission)
    admission.speech_unheard("b-e1")
    admission.end()
    admission.speech_acked("b-e1")
    assert not admission.queue.is_unresponsive("board")


# --- speech acks ---------------------------------------------------------------


def test_only_a_recent_turns_speak_is_watched() -> None:
    admission = Admission()
    assert admission.speak_seen(None) is None
    assert admission.speak_seen("b-unknown") is None
    admitted(admission.arrive(arrival("e1"), NOW))
    assert admission.speak_seen("b-e1") == "b-e1"


def test_an_ack_in_time_means_nothing_is_unheard() -> None:
    admission = Admission()
    admitted(admission.arrive(arrival("e1"), NOW))
    admission.speak_seen("b-e1")
    admission.speech_acked("b-e1")
    assert admission.speech_unheard("b-e1") is None
    assert not admission.queue.is_unresponsive("tui")


def test_an_ack_before_its_speak_was_seen_does_not_cancel_the_watch() -> None:
    # The ack (from the device) and the speak (own out.>) travel separately.
    admission = Admission()
    admitted(admission.arrive(arrival("e1"), NOW))
    admission.speech_acked("b-e1")
    admission.speak_seen("b-e1")
    assert admission.speech_unheard("b-e1") == Unheard("tui", newly=True, supersede=False)


def test_each_unheard_speak_counts_once_and_only_the_first_is_new() -> None:
    admission = Admission()
    for event_id in ("e1", "e2"):
        admitted(admission.arrive(arrival(event_id, device="board"), NOW))
        admission.speak_seen(f"b-{event_id}")
    assert admission.speech_unheard("b-e1") == Unheard("board", newly=True, supersede=False)
    assert admission.speech_unheard("b-e1") is None
    assert admission.speech_unheard("b-e2") == Unheard("board", newly=False, supersede=False)


def test_an_ack_for_an_unknown_binding_is_ignored() -> None:
    admission = Admission()
    admission.speech_acked("b-nobody")
    assert admission.speech_unheard("b-nobody") is None


def test_the_unacked_watch_keeps_only_the_recent_window() -> None:
    admission = Admission(recent=2)
    admitted(admission.arrive(arrival("e1"), NOW))
    admission.speak_seen("b-e1")
    admission.speak_seen("b-e1")
    for event_id in ("e2", "e3"):
        admitted(admission.arrive(arrival(event_id), NOW))
        admission.speak_seen(f"b-{event_id}")
    assert admission.speech_unheard("b-e1") is None
    assert admission.speech_unheard("b-e3") is not None


# --- refusals and re-prompts ---------------------------------------------------


def test_a_refusal_earns_one_reprompt_ahead_of_everything() -> None:
    admission = Admission()
    first = admitted(admission.arrive(arrival("e1"), NOW))
    admitted(admission.arrive(arrival("e2", device="board"), NOW))
    ruling = admission.refused("b-e1", "it was a table", 2.0)
    assert ruling is not None
    again = ruling.turn
    assert again.text == rewrite_request("it was a table")
    assert again.reprompt and again.binding.reprompt
    assert again.binding.binding_id == "b-e1" and again.binding.turn == first.binding.turn
    assert again.correlation == {**first.correlation, "reprompt": True}
    assert (again.received_at, again.msg, again.expires_at) == (2.0, None, None)
    assert admission.refused("b-e1", "still a table", 3.0) is None
    taken = [admission.begin() for _ in range(3)]
    assert taken[:2] == [again, first] and taken[2].binding.device == "board"


def test_a_refusal_may_come_before_or_after_its_turn_ended() -> None:
    admission = Admission()
    admitted(admission.arrive(arrival("e1"), NOW))
    admitted(admission.arrive(arrival("e2"), NOW))
    admission.begin()
    assert admission.refused("b-e1", "too long", 2.0) is not None  # in flight
    admission.end()
    admission.begin()
    admission.end()
    assert admission.refused("b-e2", "too long", 2.0) is not None  # already over


def test_a_refusal_for_an_unknown_binding_is_ignored() -> None:
    assert Admission().refused("b-nobody", "too long", 2.0) is None


def test_a_reprompt_of_a_silent_devices_turn_in_flight_can_supersede_it() -> None:
    admission = Admission()
    _silent_board_in_flight(admission)
    admission.speech_unheard("b-e1")
    admitted(admission.arrive(arrival("e2", device="tui"), NOW))
    ruling = admission.refused("b-e2", "too long", 2.0)
    assert ruling is not None and ruling.supersede


def test_a_forgotten_turn_can_no_longer_be_reprompted_and_leaves_no_mark() -> None:
    admission = Admission(recent=1)
    admitted(admission.arrive(arrival("e1"), NOW))
    assert admission.refused("b-e1", "too long", 2.0) is not None
    admitted(admission.arrive(arrival("e2"), NOW))
    assert admission.refused("b-e1", "too long", 2.0) is None
    # Its binding, arriving again on a new event, earns a re-prompt of its own.
    admitted(admission.arrive(arrival("e3", binding_id="b-e1"), NOW))
    assert admission.refused("b-e1", "too long", 2.0) is not None


def test_a_binding_reused_by_a_new_event_is_reprompted_at_most_once() -> None:
    admission = Admission()
    admitted(admission.arrive(arrival("e1", binding_id="shared"), NOW))
    assert admission.refused("shared", "too long", 2.0) is not None
    admitted(admission.arrive(arrival("e2", binding_id="shared"), NOW))
    assert admission.refused("shared", "too long", 2.0) is None


# --- redelivery, endings, aborts -------------------------------------------------


def test_an_utterance_is_delivered_at_most_twice_across_tau_deaths() -> None:
    turn = admitted(Admission().arrive(arrival("e1"), NOW))
    delivered = 0
    while True:
        turn.deliveries += 1
        delivered += 1
        if not may_redeliver(turn):
            break
    assert delivered == MAX_DELIVERIES == 2


END = WireEvent("agent_end")
FAILED = "the turn ended in an error"


@pytest.mark.parametrize(
    ("end", "aloud", "ending"),
    [
        (END, True, Ending("done", "completed", False, None)),
        (END, False, Ending("done", "completed", True, None)),
        (replace(END, end_reason="terminate"), True, Ending("terminate", "completed", False, None)),
        (
            replace(END, end_reason="terminate"),
            False,
            Ending("terminate", "completed", False, None),
        ),
        (
            replace(END, end_reason="aborted", is_error=True),
            False,
            Ending("aborted", "aborted", False, None),
        ),
        (replace(END, is_error=True), False, Ending("error", "failed", False, FAILED)),
        (replace(END, is_error=True, error="boom"), True, Ending("error", "failed", False, "boom")),
        (
            replace(END, end_reason="done", is_error=True, error="x"),
            False,
            Ending("done", "failed", True, "x"),
        ),
    ],
)
def test_how_an_ending_counts(end: WireEvent, aloud: bool, ending: Ending) -> None:
    assert judge_end(end, answers_aloud=aloud) == ending


def test_why_a_turn_was_aborted() -> None:
    assert abort_reason(yielded=True, device="board", wall_clock_s=30.0) == (
        "device board is not acknowledging speech and other devices' turns were waiting"
    )
    assert abort_reason(yielded=False, device="board", wall_clock_s=2.5) == (
        "the turn took longer than 2.5s"
    )


# --- any order -----------------------------------------------------------------

EVENT_IDS = st.sampled_from([f"e{n}" for n in range(6)])
DEVICES = st.sampled_from(["tui", "board", None])


class AnyOrder(RuleBasedStateMachine):
    """Arrivals, departures, speaks, acks, silences and refusals in any order."""

    def __init__(self) -> None:
        super().__init__()
        self.admission = Admission(dedup_window=4, recent=3)
        self.queued: set[int] = set()
        self.reprompts = 0
        self.run: list[PendingTurn] = []

    @rule(event_id=EVENT_IDS, device=DEVICES, stale=st.booleans())
    def arrive(self, event_id: str, device: str | None, stale: bool) -> None:
        expires_at = NOW - timedelta(seconds=1) if stale else NOW + TTL
        ruling = self.admission.arrive(arrival(event_id, device=device, expires_at=expires_at), NOW)
        if isinstance(ruling, Admit):
            assert not stale
            assert ruling.supersede == self.admission.should_yield()
            self.queued.add(id(ruling.turn))
        else:
            assert ruling in (DUPLICATE, STALE)
            assert ruling is not STALE or stale

    @precondition(lambda self: len(self.admission) > 0)
    @rule()
    def begin(self) -> None:
        turn = self.admission.begin()
        self.queued.remove(id(turn))
        self.run.append(turn)

    @rule()
    def end(self) -> None:
        self.admission.end()

    @rule(event_id=EVENT_IDS)
    def speak(self, event_id: str) -> None:
        watched = self.admission.speak_seen(f"b-{event_id}")
        assert watched in (None, f"b-{event_id}")

    @rule(event_id=EVENT_IDS)
    def ack(self, event_id: str) -> None:
        self.admission.speech_acked(f"b-{event_id}")

    @rule(event_id=EVENT_IDS)
    def unheard(self, event_id: str) -> None:
        unheard = self.admission.speech_unheard(f"b-{event_id}")
        if unheard is not None:
            assert self.admission.queue.is_unresponsive(unheard.device)
            assert unheard.supersede == self.admission.should_yield()

    @rule(event_id=EVENT_IDS)
    def refuse(self, event_id: str) -> None:
        ruling = self.admission.refused(f"b-{event_id}", "too long", 2.0)
        if ruling is not None:
            assert ruling.turn.reprompt and ruling.turn.expires_at is None
            self.queued.add(id(ruling.turn))
            # Ahead of everything waiting.
            assert next(iter(self.admission.queue)) is ruling.turn

    @invariant()
    def the_queue_holds_exactly_what_was_admitted_and_not_taken(self) -> None:
        assert len(self.admission) == len(self.queued)
        assert {id(t) for t in self.admission.queue} == self.queued

    @invariant()
    def only_a_turn_in_flight_yields(self) -> None:
        if self.admission.should_yield():
            current = self.admission.current
            assert current is not None
            assert self.admission.queue.is_unresponsive(current.binding.device)

    @invariant()
    def no_two_waiting_utterances_share_a_turn_number(self) -> None:
        numbers = [t.binding.turn for t in self.admission.queue if not t.reprompt]
        assert len(set(numbers)) == len(numbers)


TestAnyOrder = AnyOrder.TestCase
TestAnyOrder.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
