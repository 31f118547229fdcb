"""The HIL suites: smoke, turn, linkdrop, soak, fleet, wake; each named cases on a TargetContext.

Every case says what it expected and what happened when it fails, and records
its measurements (latency per stage in ms, resources per sample).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from edge.wake import WAKE_MODELS
from hil.fleet import Fleet, FleetLoad
from hil.model import Measurement
from hil.runner import BadOption, Case, CaseFailed, HilError, Suite, UnknownSuite
from hil.targets.base import Seen, TargetContext
from hil.wait import TOTAL as WAIT
from hil.wait import HomeArrivals, turn_wait
from hil.wake import HALVES, build_corpus, score
from shared.errors import EnvelopeError
from shared.event import Event
from shared.messages.memory import RecallReport
from shared.messages.trace import monotonic_clock
from shared.messages.voice import SpeechCompleted, Turn
from shared.subjects import (
    EVENTS_PREFIX,
    SPEECH_COMPLETED_PREFIX,
    WORKSPACE_PREFIX,
    sensation_turn_subject,
)

MIN_DISK_MB = 200.0
MIN_MEM_MB = 100.0
MAX_CLOCK_SKEW_S = 5.0
MAX_SOAK_RSS_GROWTH_MB = 150.0
WAKE_MAX_FALSE_REJECT_PERCENT = 5.0
WAKE_MAX_FALSE_ACCEPTS_PER_HOUR = 1.0


# --- smoke ------------------------------------------------------------------------


async def board_reachable(ctx: TargetContext) -> list[Measurement]:
    reason = await ctx.board.reachable()
    if reason is not None:
        raise CaseFailed(reason)
    return []


async def services_up(ctx: TargetContext) -> list[Measurement]:
    services = await ctx.board.services()
    down = {name: state for name, state in services.items() if state != "active"}
    if down:
        raise CaseFailed(f"expected every service active; not active: {down}")
    measurements = [Measurement("services_active", float(len(services)), "count")]
    restarts = await ctx.board.restarts()
    if restarts is not None:
        measurements.append(Measurement("edge_restarts", float(restarts), "count"))
    return measurements


async def bridge_connected(ctx: TargetContext) -> list[Measurement]:
    began = time.monotonic()
    if not await ctx.board.wait_link(True, 30.0):
        raise CaseFailed("expected the board's bridge link to home up within 30 s; it is down")
    return [Measurement("link_up_wait_ms", (time.monotonic() - began) * 1000, "ms")]


async def versions_match(ctx: TargetContext) -> list[Measurement]:
    versions = await ctx.board.versions()
    if versions.get("board") != versions.get("home"):
        raise CaseFailed(
            f"expected the board to run home's version of tether; board {versions.get('board')},"
            f" home {versions.get('home')}"
        )
    carried, home_copy = await ctx.board.half_digests()
    if carried != home_copy:
        raise CaseFailed(
            f"the bridge half on the board (digest {carried[:12]}) is not the one home paired "
            f"(digest {home_copy[:12]}); pair the board again and reflash or copy the half"
        )
    return []


async def clock_sane(ctx: TargetContext) -> list[Measurement]:
    skew = abs((await ctx.board.clock() - datetime.now(UTC)).total_seconds())
    if skew > MAX_CLOCK_SKEW_S:
        raise CaseFailed(
            f"the board's clock is {skew:.1f} s off home's (at most {MAX_CLOCK_SKEW_S:g} s); "
            "events would expire early or late"
        )
    return [Measurement("clock_skew_s", skew, "s")]


async def headroom(ctx: TargetContext) -> list[Measurement]:
    room = await ctx.board.headroom()
    if room.disk_free_mb < MIN_DISK_MB or room.mem_available_mb < MIN_MEM_MB:
        raise CaseFailed(
            f"expected at least {MIN_DISK_MB:g} MB disk and {MIN_MEM_MB:g} MB memory free; "
            f"found {room.disk_free_mb:.0f} MB and {room.mem_available_mb:.0f} MB"
        )
    return [
        Measurement("disk_free_mb", room.disk_free_mb, "MB"),
        Measurement("mem_available_mb", room.mem_available_mb, "MB"),
    ]


# --- turn -------------------------------------------------------------------------


async def one_turn(ctx: TargetContext, phrase: str, sample: int) -> list[Measurement]:
    """Inject ``phrase``; follow its turn on home to the answer and the board's ack."""
    began = time.monotonic()
    played_before = await ctx.board.playbacks()
    speech_end = await ctx.board.inject(phrase)
    turn = await _turn_with_text(ctx, phrase, since=began, within_s=ctx.turn_timeout_s)
    bid = turn.event.binding_id
    spoken = await _answer(ctx, bid, since=turn.at)
    if spoken is None:
        raise CaseFailed(
            f"home heard {phrase!r} (binding {bid}) but no agent answered it within "
            f"{ctx.turn_timeout_s:g} s"
        )
    measurements = [
        Measurement("asr_ms", (turn.at - speech_end) * 1000, "ms", sample=sample),
        Measurement("agent_ms", (spoken.at - turn.at) * 1000, "ms", sample=sample),
    ]
    if ".out.speak." in spoken.subject:
        ack = await _played(ctx, phrase, bid, since=spoken.at)
        measurements.append(
            Measurement("playback_ms", (ack.at - spoken.at) * 1000, "ms", sample=sample)
        )
        measurements += _wait_measurements(ctx, turn, spoken, ack, sample)
        await _answer_played(ctx, bid, since=turn.at)
        played = await ctx.board.playbacks()
        if played is not None and played_before is not None and played <= played_before:
            raise CaseFailed(
                f"home says the board played the answer to {phrase!r}, but no new playback "
                "appeared in its output spool"
            )
    return measurements


async def _played(ctx: TargetContext, phrase: str, bid: str | None, *, since: float) -> Seen:
    """The board's speech ack of the answer; CaseFailed unless it says it played."""
    ack = await ctx.home.wait(
        SPEECH_COMPLETED_PREFIX, binding_id=bid, since=since,
        within_s=ctx.turn_timeout_s,
    )  # fmt: skip
    if ack is None:
        raise CaseFailed(f"the board never acked playing the answer to {phrase!r}")
    try:
        played_ok = SpeechCompleted.from_event(ack.event).ok
    except EnvelopeError as exc:
        raise CaseFailed(f"the board's playback ack is malformed: {exc}") from exc
    if not played_ok:
        raise CaseFailed(f"the board failed to play the answer: {ack.event.payload}")
    return ack


# An answer can come in parts (its first sentence while the model writes the rest): it is
# over once every part is acked and no further part followed within this long.
ANSWER_SETTLE_S = 1.5


async def _answer_played(ctx: TargetContext, bid: str | None, *, since: float) -> None:
    """Return once every speak of the turn has been acked and no more came; the next
    utterance injected before would reach a microphone the echo gate keeps shut."""
    deadline = time.monotonic() + ctx.turn_timeout_s
    while time.monotonic() < deadline:
        speaks = [s for s in ctx.home.matching(WORKSPACE_PREFIX, bid, since)
                  if ".out.speak." in s.subject]  # fmt: skip
        acks = ctx.home.matching(SPEECH_COMPLETED_PREFIX, bid, since)
        last = max((s.at for s in (*speaks, *acks)), default=since)
        if len(acks) >= len(speaks) and time.monotonic() - last >= ANSWER_SETTLE_S:
            return
        await ctx.home.wait(EVENTS_PREFIX, since=time.monotonic(), within_s=0.25)
    raise CaseFailed(f"the board did not finish playing the answer of binding {bid}")


def _wait_measurements(
    ctx: TargetContext, turn: Seen, spoken: Seen, ack: Seen, sample: int
) -> list[Measurement]:
    """End of speech to first audio (``wait_ms``) and its stages (``wait_<stage>_ms``)."""
    bid = turn.event.binding_id
    inbox = next(
        (s for s in ctx.home.matching(WORKSPACE_PREFIX, bid, turn.at) if s.subject.endswith(".in")),
        None,
    )
    recall = next(
        (
            s
            for s in ctx.home.matching(WORKSPACE_PREFIX, bid, turn.at)
            if ".out.recall." in s.subject
        ),
        None,
    )
    try:
        turn_marks = Turn.from_event(turn.event).trace
        ack_marks = SpeechCompleted.from_event(ack.event).trace
        recall_ms = None if recall is None else RecallReport.from_event(recall.event).latency_ms
    except EnvelopeError as exc:
        raise CaseFailed(f"a message of the turn is malformed: {exc}") from exc
    arrivals = HomeArrivals(
        turn=turn.at,
        inbox=None if inbox is None else inbox.at,
        speak=spoken.at,
        recall=None if recall is None or recall.at > spoken.at else recall.at,
        recall_latency_ms=recall_ms,
    )
    stages = turn_wait(turn_marks, ack_marks, arrivals, monotonic_clock())
    return [
        Measurement(
            f"{WAIT}_ms" if stage == WAIT else f"{WAIT}_{stage}_ms",
            value,
            "ms",
            None if stage == WAIT else stage,
            sample,
        )
        for stage, value in stages.items()
    ]


async def _answer(ctx: TargetContext, binding_id: str | None, *, since: float) -> Seen | None:
    """The first speak or reply of ``binding_id`` on home after ``since``, waiting for it."""
    deadline = time.monotonic() + ctx.turn_timeout_s
    while time.monotonic() < deadline:
        for seen in ctx.home.matching(WORKSPACE_PREFIX, binding_id, since):
            if ".out.speak." in seen.subject or ".out.reply." in seen.subject:
                return seen
        await ctx.home.wait(WORKSPACE_PREFIX, since=time.monotonic(), within_s=0.5)
    return None


async def _turn_with_text(
    ctx: TargetContext, phrase: str, *, since: float, within_s: float
) -> Seen:
    """The turn made of ``phrase``: its exact text when the board's recognizer has the phrase
    grammar, else (free recognition) the first turn with any text since the injection."""
    subject = sensation_turn_subject(ctx.board.device)
    exact = ctx.board.exact_text
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        for seen in ctx.home.matching(subject, since=since):
            text = _turn_text(seen.event)
            if text == phrase or (not exact and isinstance(text, str) and text.strip()):
                return seen
        await ctx.home.wait(subject, since=time.monotonic(), within_s=0.5)
    heard = [_turn_text(s.event) for s in ctx.home.matching(subject, since=since)]
    wanted = f"a turn {phrase!r}" if exact else f"a turn (any text; {phrase!r} was spoken)"
    raise CaseFailed(f"expected {wanted} on home within {within_s:g} s; heard {heard}")


def _turn_text(event: Event) -> str | None:
    """The words of a turn, or None for an event that is no well-formed turn."""
    try:
        return Turn.from_event(event).text
    except EnvelopeError:
        return None


def turn_cases(ctx_phrases: tuple[str, ...]) -> tuple[Case[TargetContext], ...]:
    """One case per phrase, numbered as samples for the latency plot."""

    def case(phrase: str, sample: int) -> Case[TargetContext]:
        async def run(ctx: TargetContext) -> list[Measurement]:
            return await one_turn(ctx, phrase, sample)

        return Case(f"turn_{sample}_{phrase}", run, timeout_s=180)

    return tuple(case(p, i) for i, p in enumerate(ctx_phrases))


# --- linkdrop ---------------------------------------------------------------------


async def linkdrop(ctx: TargetContext) -> list[Measurement]:
    """Cut the link, speak, restore: a notice while down, the turn delivered once after."""
    board = ctx.board
    phrase = board.phrases[0]
    notices_before = await board.notices()
    await board.cut_link()
    cut_at = time.monotonic()
    try:
        if not await board.wait_link(False, 30.0):
            raise CaseFailed("the board did not notice the cut link within 30 s")
        noticed_ms = (time.monotonic() - cut_at) * 1000
        began = time.monotonic()
        await board.inject(phrase)
        deadline = time.monotonic() + 30
        while await board.notices() <= notices_before:
            if time.monotonic() > deadline:
                raise CaseFailed("home was unreachable but the board said nothing (no notice)")
            await asyncio.sleep(0.2)
        await asyncio.sleep(max(0.0, ctx.linkdrop_s - (time.monotonic() - cut_at)))
    finally:
        await board.restore_link()
    restored_at = time.monotonic()
    if not await board.wait_link(True, 60.0):
        raise CaseFailed("the link did not come back by itself within 60 s of restoring it")
    recovered_ms = (time.monotonic() - restored_at) * 1000
    turn = await _turn_with_text(ctx, phrase, since=began, within_s=ctx.turn_timeout_s)
    await asyncio.sleep(2.0)  # a duplicate, if any, arrives right behind the original
    copies = [
        s for s in ctx.home.matching(sensation_turn_subject(board.device), since=began)
        if s.event.event_id == turn.event.event_id
    ]  # fmt: skip
    if len(copies) != 1:
        raise CaseFailed(f"the turn made while down arrived {len(copies)} times, not once")
    return [
        Measurement("link_down_noticed_ms", noticed_ms, "ms"),
        Measurement("link_recovered_ms", recovered_ms, "ms"),
        Measurement("turn_delivered_after_restore_ms", (turn.at - restored_at) * 1000, "ms"),
    ]


# --- soak -------------------------------------------------------------------------


async def soak(ctx: TargetContext) -> list[Measurement]:
    """``soak_turns`` turns spread over ``soak_minutes``: memory, CPU, errors."""
    board = ctx.board
    interval = ctx.soak_minutes * 60 / max(ctx.soak_turns, 1)
    measurements: list[Measurement] = []
    errors: list[str] = []
    first = await board.sample()
    for i in range(ctx.soak_turns):
        began = time.monotonic()
        phrase = board.phrases[i % len(board.phrases)]
        try:
            measurements += await one_turn(ctx, phrase, 1000 + i)
        except CaseFailed as exc:
            errors.append(f"turn {i}: {exc.reason}")
        sample = await board.sample()
        measurements += [
            Measurement("rss_mb", sample.rss_mb, "MB", sample=i),
            Measurement("cpu_percent", sample.cpu_percent, "%", sample=i),
        ]
        if sample.temperature_c is not None:
            measurements.append(Measurement("temperature_c", sample.temperature_c, "C", sample=i))
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - began)))
    last = await board.sample()
    growth = last.rss_mb - first.rss_mb
    measurements.append(Measurement("rss_growth_mb", growth, "MB"))
    if errors:
        raise CaseFailed(f"{len(errors)} of {ctx.soak_turns} turns failed: {errors}", measurements)
    if growth > MAX_SOAK_RSS_GROWTH_MB:
        raise CaseFailed(
            f"the edge grew {growth:.0f} MB over the soak (at most {MAX_SOAK_RSS_GROWTH_MB:g})",
            measurements,
        )
    return measurements


# --- fleet ------------------------------------------------------------------------


async def fleet(ctx: TargetContext, boards: int) -> list[Measurement]:
    """``boards`` simulated boards on the target's home, each speaking ``fleet_turns`` turns:
    every turn answered exactly once, with latency and home's cost per board."""
    if ctx.home_dir is None:
        raise CaseFailed("the fleet suite pairs boards with home: give --home-dir")
    load = FleetLoad(
        turns=ctx.fleet_turns, interval_s=ctx.fleet_interval_s, turn_timeout_s=ctx.turn_timeout_s
    )
    try:
        async with Fleet(ctx.home_dir, boards) as boards_up:
            report = await boards_up.run(load)
    except HilError as exc:
        raise CaseFailed(str(exc)) from exc
    measurements = [
        Measurement("turns_sent", float(report.sent), "count"),
        Measurement("turns_answered", float(report.answered), "count"),
        Measurement("turns_lost", float(report.lost), "count"),
        Measurement("turns_duplicated", float(report.duplicated), "count"),
        Measurement("turn_p50_ms", report.quantile_ms(0.5), "ms"),
        Measurement("turn_p99_ms", report.quantile_ms(0.99), "ms"),
        Measurement("warmup_turn_p99_ms", report.quantile_ms(0.99, first=True), "ms"),
        Measurement("pairing_s", report.pair_s, "s"),
        Measurement("links_up_s", report.link_s, "s"),
        Measurement("home_rss_per_board_mb", report.home_rss_mb / boards, "MB"),
        Measurement("home_cpu_per_board_ms", report.home_cpu_s / boards * 1000, "ms"),
        Measurement("home_open_files", float(report.home_fds), "count"),
    ]
    if report.lost or report.duplicated:
        raise CaseFailed(
            f"expected each of {report.sent} turns answered exactly once; {report.lost} got no "
            f"answer within {load.turn_timeout_s:g} s and {report.duplicated} extra answers came",
            measurements,
        )
    return measurements


def fleet_cases(sizes: tuple[int, ...]) -> tuple[Case[TargetContext], ...]:
    """One case per fleet size, smallest first."""

    def case(boards: int) -> Case[TargetContext]:
        async def run(ctx: TargetContext) -> list[Measurement]:
            return await fleet(ctx, boards)

        return Case(f"fleet_{boards}", run, timeout_s=600 + 10 * boards)

    return tuple(case(n) for n in sorted(sizes))


def parse_fleet_sizes(text: str) -> tuple[int, ...]:
    """``"1,10,50"`` as board counts; BadOption naming the option for anything else."""
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise BadOption(
            f"--fleet-boards takes comma-separated counts like 1,10; got {text!r}"
        ) from None
    if not sizes or min(sizes) < 1:
        raise BadOption(f"--fleet-boards needs counts of at least 1; got {text!r}")
    return sizes


# --- wake -------------------------------------------------------------------------


async def wake(ctx: TargetContext, model: str) -> list[Measurement]:
    """``model`` on the wake corpus (hil/wake.py), both halves: false rejects per 100 wake
    words, false accepts per hour of background, and the other models' wake words it
    heard. Judged on the held-out half, for the model the board listens with
    (``--wake-model``); the others are measured only."""
    corpus = await asyncio.to_thread(build_corpus, ctx.wake_hours, 7, ctx.wake_carriers)
    measurements = []
    for half in HALVES:
        result = await asyncio.to_thread(score, model, corpus, half)
        measurements += [
            Measurement("false_reject_percent", result.false_reject_percent, "%", half),
            Measurement("false_accepts_per_hour", result.false_accepts_per_hour, "/h", half),
            Measurement("wake_words", float(result.wake_words), "count", half),
            Measurement("background_hours", result.background_hours, "h", half),
            Measurement("near_miss_accepts", float(result.near_miss_accepts), "count", half),
            Measurement("other_wake_word_accepts", float(result.other_accepts), "count", half),
        ]
        measurements += [
            Measurement(f"false_rejects_{kind}", float(n), "count", half)
            for kind, n in sorted(result.rejects_by.items())
        ]
    if model != ctx.wake_model:
        return measurements
    held = {m.name: m.value for m in measurements if m.stage == "held_out"}
    if (
        held["false_reject_percent"] > WAKE_MAX_FALSE_REJECT_PERCENT
        or held["false_accepts_per_hour"] > WAKE_MAX_FALSE_ACCEPTS_PER_HOUR
    ):
        raise CaseFailed(
            f"{model} on the held-out half: {held['false_reject_percent']:.1f} false rejects "
            f"per 100 wake words (at most {WAKE_MAX_FALSE_REJECT_PERCENT:g}) and "
            f"{held['false_accepts_per_hour']:.2f} false accepts per hour of background "
            f"(at most {WAKE_MAX_FALSE_ACCEPTS_PER_HOUR:g})",
            measurements,
        )
    return measurements


def wake_cases() -> tuple[Case[TargetContext], ...]:
    """One case per wake word model in the wheel."""

    def case(model: str) -> Case[TargetContext]:
        async def run(ctx: TargetContext) -> list[Measurement]:
            return await wake(ctx, model)

        return Case(f"wake_{model}", run, timeout_s=3600)

    return tuple(case(m) for m in WAKE_MODELS)


def check_wake_options(model: str, hours: float) -> None:
    """BadOption naming ``--wake-model`` or ``--wake-hours`` when either cannot be used."""
    if model not in WAKE_MODELS:
        raise BadOption(f"--wake-model must be one of {', '.join(WAKE_MODELS)}; got {model!r}")
    if hours <= 0:
        raise BadOption(f"--wake-hours must be more than 0; got {hours:g}")


SUITE_NAMES = ("smoke", "turn", "linkdrop", "soak", "fleet", "wake")


def build_suites(
    names: list[str], phrases: tuple[str, ...], fleet_sizes: tuple[int, ...] = (10,)
) -> list[Suite[TargetContext]]:
    """The named suites, in the order given; UnknownSuite for a name that is none of them."""
    table: dict[str, Suite[TargetContext]] = {
        "smoke": Suite(
            "smoke",
            (
                Case("board_reachable", board_reachable, 60),
                Case("services_up", services_up, 60),
                Case("bridge_connected", bridge_connected, 60),
                Case("versions_and_half_match", versions_match, 60),
                Case("clock_sane", clock_sane, 30),
                Case("headroom", headroom, 30),
            ),
        ),
        "turn": Suite("turn", turn_cases(phrases)),
        "linkdrop": Suite("linkdrop", (Case("cut_speak_restore", linkdrop, 300),)),
        "soak": Suite("soak", (Case("soak", soak, 3600),)),
        "fleet": Suite("fleet", fleet_cases(fleet_sizes)),
        "wake": Suite("wake", wake_cases()),
    }
    unknown = [n for n in names if n not in table]
    if unknown:
        raise UnknownSuite(f"unknown suite(s) {unknown}; choose from {', '.join(SUITE_NAMES)}")
    return [table[n] for n in names]
