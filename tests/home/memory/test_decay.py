"""Review decay on a real JMFTS: an unreviewed memory sinks without vanishing; use lifts it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from home.jmfts.testing import RunningJmfts
from home.memory.config import parse_config
from home.memory.fsrs import ReviewBook
from home.memory.memories import MemoryStore
from home.memory.reflex import Recaller

DECAYING, PLAIN = "workspace/dk/decaying", "workspace/dk/plain"
FACT = "The user's piano teacher is called Mrs Okafor."


async def test_an_old_unreviewed_memory_sinks_on_a_decaying_root_and_use_lifts_it(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    token = await jmfts.principal("dk", ["workspace/dk"])
    long_ago = datetime.now(UTC) - timedelta(days=60)
    old = await jmfts.write(DECAYING, FACT, event_time=long_ago)
    same = await jmfts.write(PLAIN, FACT, event_time=long_ago)
    config = parse_config(
        {
            "agent": "dk", "nats_url": "nats://unused", "binding_file": str(tmp_path / "b.json"),
            "jmfts_url": jmfts.url, "jmfts_token_file": str(tmp_path / "unused"),
            "roots": [{"path": DECAYING, "decay": True}, PLAIN], "threshold": 0.45,
        }
    )  # fmt: skip
    async with MemoryStore(jmfts.url, token=token) as store:
        recaller = Recaller(config, store, ReviewBook(config.reviews_path, 3.0))
        query = "who teaches me piano"
        record, shown = await recaller.recall(query)
        hits = {h.id: h for h in record.hits}
        # Same text, same cosine; only the decaying root's copy is scaled down, below the gate.
        assert hits[old].raw_score == hits[same].raw_score >= 0.45
        assert 0.0 < hits[old].retrievability < 0.5 and hits[old].passed is False
        assert hits[same].retrievability == 1.0 and hits[same].passed is True
        assert [h.memory.id for h in shown] == [same]

        # Recalled and used (the end of a turn records it as a review): the clock restarts
        # and stability grows, so the memory is back above the gate and sinks slower.
        recaller.reviews.review(old, long_ago, datetime.now(UTC), used=True)
        record, shown = await recaller.recall(query)
        assert old in [h.memory.id for h in shown]
        state = recaller.reviews.state(old, long_ago)
        assert state.reviews == 1 and state.stability_days > 3.0
