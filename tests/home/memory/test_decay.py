"""Review decay on a real JMFTS: an old unreviewed memory sinks in rank but is still
recalled; use lifts it; a restatement reinforces it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from home.jmfts.testing import RunningJmfts
from home.memory.config import parse_config
from home.memory.extract import Extracted
from home.memory.fsrs import ReviewBook
from home.memory.memories import MemoryStore
from home.memory.reflex import Depositor, Recaller

ROOT = "workspace/dk"
FACT = "The user's piano teacher is called Mrs Okafor."
SAME = "The user's piano teacher is called Mrs Okafor!"


async def test_an_old_memory_sinks_below_a_new_one_yet_passes_and_use_lifts_it(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    token = await jmfts.principal("dk", [ROOT])
    long_ago = datetime.now(UTC) - timedelta(days=400)
    old = await jmfts.write(ROOT, FACT, event_time=long_ago)
    new = await jmfts.write(ROOT, FACT)
    config = parse_config(
        {
            "agent": "dk", "nats_url": "nats://unused", "binding_file": str(tmp_path / "b.json"),
            "jmfts_url": jmfts.url, "jmfts_token_file": str(tmp_path / "unused"),
            "roots": [{"path": ROOT, "decay": True}], "threshold": 0.45,
        }
    )  # fmt: skip
    async with MemoryStore(jmfts.url, token=token) as store:
        recaller = Recaller(config, store, ReviewBook(config.reviews_path, 3.0))
        query = "who teaches me piano"
        record, shown = await recaller.recall(query)
        hits = {h.id: h for h in record.hits}
        # Same cosine; the year-old copy ranks second, and still passes the gate.
        assert hits[old].raw_score == hits[new].raw_score >= 0.45
        assert 0.0 < hits[old].retrievability < 0.2 < hits[new].retrievability
        assert [h.id for h in record.hits][:2] == [new, old]
        assert hits[old].passed and old in [h.memory.id for h in shown]

        # Recalled and used (the end of a turn records it as a review): the clock restarts
        # and stability grows, so it ranks level again; unused, the other is left alone.
        recaller.review([h for h in shown if h.memory.id == old], {old})
        recaller.review([h for h in shown if h.memory.id == new], set())
        state = recaller.reviews.state(old, long_ago)
        assert state.reviews == 1 and state.stability_days > 3.0
        assert recaller.reviews.state(new, datetime.now(UTC)).reviews == 0
        record, _ = await recaller.recall(query)
        assert {h.id: h for h in record.hits}[old].retrievability == 1.0


async def test_saying_a_fact_again_reinforces_the_memory_and_says_so(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    token = await jmfts.principal("dk", [ROOT])
    config = parse_config(
        {
            "agent": "dk", "nats_url": "nats://unused", "binding_file": str(tmp_path / "b.json"),
            "jmfts_url": jmfts.url, "jmfts_token_file": str(tmp_path / "unused"),
            "roots": [{"path": ROOT, "decay": True}], "memory_root": ROOT,
        }
    )  # fmt: skip
    day = [datetime.now(UTC) - timedelta(days=60)]
    book = ReviewBook(config.reviews_path, 3.0)
    async with MemoryStore(jmfts.url, token=token) as store:
        depositor = Depositor(config, store, book, clock=lambda: day[0])
        (first,) = await depositor.deposit([Extracted(FACT, "draft", (FACT,))])
        assert first.action == "created"
        written = (await jmfts.document(first.id))["event_time"]
        assert datetime.fromisoformat(written) == day[0]  # stamped with when it was said
        day[0] += timedelta(days=30)
        (again,) = await depositor.deposit([Extracted(SAME, "draft", (SAME,))])
        assert (again.action, again.id) == ("reinforced", first.id)
        state = book.state(first.id, day[0])
        assert state.reviews == 1 and state.last_review == day[0].isoformat()
