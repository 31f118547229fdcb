"""Issue 34's first acceptance line, with the real embedded model (SmolLM2-135M) through
`home up` defaults: "my sister Ana lives in Porto", later "Ana moved to Lyon last month",
then "where does my sister live" recalls Lyon and not Porto; `home memory search --as-of`
a time before the move finds Porto; and `knowledge/` holds the closed and the open triple
on one entity (the sister, named Ana)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest

from shared.nats_confirm import confirm_subscriptions
from tests.home.memory.test_embedded_correction import AGENT, memory_cli, report_for
from tests.home.test_home_turn import play_edge_turn
from tests.support.home_up import running_home

pytestmark = pytest.mark.slow


async def test_a_move_said_by_name_replaces_the_home_said_by_relation(tmp_path: Path) -> None:
    async with running_home(tmp_path / "home", None, apply=(AGENT,)) as home:
        nc = await nats.connect(home.nats_url)
        try:
            recalls = await nc.subscribe("events.workspace.*.out.recall.>")
            memorized = await nc.subscribe("events.workspace.*.out.memorize.>")
            await confirm_subscriptions(nc)
            _, _, said = await play_edge_turn(home.nats_url, "my sister Ana lives in Porto", 90)
            first = await report_for(memorized, str(said.binding_id), 120)
            before_move = datetime.now(UTC)
            _, _, moved = await play_edge_turn(home.nats_url, "Ana moved to Lyon last month", 90)
            second = await report_for(memorized, str(moved.binding_id), 120)
            _, _, ask = await play_edge_turn(home.nats_url, "where does my sister live", 90)
            recall = await report_for(recalls, str(ask.binding_id), 30)
        finally:
            await nc.close()

        (porto,) = first.payload["deposits"]
        (lyon,) = second.payload["deposits"]
        assert porto["action"] == "created", first.payload
        assert lyon["action"] == "corrected" and lyon["supersedes"] == porto["id"], second.payload
        assert "closes" in (lyon["knowledge"] or ""), second.payload
        # The correction is kept as the fact it corrects, in the words said then and now.
        (kept,) = second.payload["queries"]
        assert "Lyon" in kept and "sister" in kept and "Porto" not in kept, second.payload
        injected = recall.payload["injected_ids"]
        assert lyon["id"] in injected and porto["id"] not in injected, recall.payload

        code, out = await memory_cli(
            home, "search", "where does my sister live", "--method", "vector", "--json",
            "--root", f"workspace/{AGENT}", "--as-of", before_move.isoformat(),
        )  # fmt: skip
        assert code == 0, out
        assert [h["id"] for h in json.loads(out)["results"]][:1] == [porto["id"]], out

        code, out = await memory_cli(home, "triples", "list", "--json")
        assert code == 0, out
        rows = [t for t in json.loads(out)["triples"] if t["predicate"]["name"] == "lives in"]
        by_value = {t["object_literal"]: t for t in rows}
        assert set(by_value) == {"Porto", "Lyon"}, rows
        closed, current = by_value["Porto"], by_value["Lyon"]
        assert closed["invalidated_by"] == current["id"] and current["invalidated_at"] is None
        assert closed["subject"]["id"] == current["subject"]["id"], rows
        entity = closed["subject"]["structured_content"]
        assert entity["names"] == ["ana"] and entity["relations"] == ["sister"], entity
        assert closed["source_document_id"] == porto["id"]
        assert current["source_document_id"] == lyon["id"]
