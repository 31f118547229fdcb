"""Search filters, workspace subtrees, bitemporal triples, over HTTP."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from home.jmfts.clock import age_in_words
from tests.home.jmfts.conftest import ServerProcess


def _post(client: httpx.Client, path: str, body: dict[str, Any], status: int = 200) -> Any:
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    return response.json()


def test_search_filters_and_score_kinds(shared_server: ServerProcess) -> None:
    with shared_server.client() as admin:
        a = _post(admin, "/documents", {"title": "garden-a", "content": "tomato seedlings"})
        b = _post(admin, "/documents", {"title": "garden-b", "content": "tomato harvest"})
        entity = _post(
            admin,
            "/documents",
            {
                "parent_id": a["id"],
                "title": "Tomato",
                "content": "tomato plant",
                "usetype": "entity",
            },
        )
        old = _post(
            admin,
            "/documents",
            {
                "parent_id": a["id"],
                "title": "diary",
                "content": "tomato blight last year",
                "event_time": (datetime.now(UTC) - timedelta(days=400)).isoformat(),
            },
        )

        def ids(method: str, **body: Any) -> tuple[list[int], dict[str, Any]]:
            payload = _post(admin, f"/search/{method}", {"query": "tomato", "limit": 50, **body})
            return [h["id"] for h in payload["results"]], payload

        found, payload = ids("vector")
        assert entity["id"] not in found  # entity and summary are excluded unless asked
        assert payload["score_kind"] == "cosine"
        assert all(-1.0 <= h["score"] <= 1.0 for h in payload["results"])
        assert ids("vector", usetype="entity")[0] == [entity["id"]]
        assert entity["id"] in ids("vector", exclude_types=[])[0]
        assert set(ids("vector", roots=[a["id"]])[0]) == {a["id"], old["id"]}
        assert set(ids("fulltext", parent_id=b["id"])[0]) == {b["id"]}
        as_of = (datetime.now(UTC) - timedelta(days=30)).isoformat()
        assert old["id"] in ids("hybrid", as_of=as_of)[0]
        assert a["id"] not in ids("hybrid", as_of=as_of)[0]
        recent = (datetime.now(UTC) - timedelta(days=1)).isoformat()
        assert old["id"] not in ids("vector", created_after=recent)[0]
        high, _ = ids("vector", threshold=0.99)
        assert high == []
        _, fused = ids("hybrid")
        assert fused["score_kind"] == "fused_score"
        assert fused["applied"]["methods"] == ["vector", "fulltext"]
        hit = next(h for h in fused["results"] if h["id"] == old["id"])
        assert hit["age"] == "1 year ago" and hit["path"] == "garden-a/diary"
        assert "tomato" in hit["snippet"]
        assert (
            admin.post("/search/hybrid", json={"query": "x", "methods": ["maxsim"]}).status_code
            == 400
        )


def test_hybrid_search_weighs_recency_and_refuses_what_it_cannot_weigh(
    shared_server: ServerProcess,
) -> None:
    """Before: recency and importance weights were accepted and ignored, and the answer
    looked as if they had been honoured."""
    now = datetime.now(UTC)
    tag = f"kiln{time.time_ns()}"
    with shared_server.client() as admin:
        long_ago = (now - timedelta(days=3000)).isoformat()
        root = _post(admin, "/documents", {"title": "pottery", "event_time": long_ago})
        said = {
            days: _post(
                admin,
                "/documents",
                {
                    "parent_id": root["id"],
                    "title": f"{days} days",
                    "content": f"the {tag} was fired at {1000 + days} degrees",
                    "event_time": (now - timedelta(days=days)).isoformat(),
                },
            )["id"]
            for days in (300, 30, 1)
        }

        def ranked(**body: Any) -> list[dict[str, Any]]:
            payload = _post(
                admin,
                "/search/hybrid",
                {"query": f"{tag} fired degrees", "parent_id": root["id"], "limit": 3, **body},
            )
            return list(payload["results"])

        plain = ranked()
        assert all(set(h["found_by"]) <= {"vector", "fulltext", "context"} for h in plain)
        assert all("fulltext" in h["found_by"] for h in plain)
        # Heavily weighed, the newest comes first and the oldest last, whatever the text.
        recent = ranked(recency_weight=5.0, recency_halflife_days=7, now=now.isoformat())
        assert [h["id"] for h in recent] == [said[1], said[30], said[300]]
        assert all("recency" in h["found_by"] for h in recent)
        # Counted to a moment years ahead, every age is many half-lives: relevance ranks.
        later = (now + timedelta(days=3650)).isoformat()
        faded = ranked(recency_weight=5.0, recency_halflife_days=7, now=later)
        assert [h["id"] for h in faded] == [h["id"] for h in plain] != [h["id"] for h in recent]
        refused = admin.post("/search/hybrid", json={"query": tag, "importance_weight": 1.0})
        assert refused.status_code == 422, refused.text
        assert "importance_weight" in refused.text
        unknown = admin.post("/search/hybrid", json={"query": tag, "weights": {"recency": 1}})
        assert unknown.status_code == 400 and "weights" in unknown.text
        vector = _post(admin, "/search/vector", {"query": tag, "parent_id": root["id"]})
        assert {tuple(h["found_by"]) for h in vector["results"]} == {("vector",)}


def test_age_in_words() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    assert age_in_words(now - timedelta(days=21), now) == "3 weeks ago"
    assert age_in_words(now - timedelta(seconds=5), now) == "just now"
    assert age_in_words(now - timedelta(hours=1), now) == "1 hour ago"
    assert age_in_words(now + timedelta(days=1), now) == "in the future"


def test_workspace_is_append_only_and_viewed_at_read_time(shared_server: ServerProcess) -> None:
    with shared_server.client() as admin:
        ws = _post(admin, "/documents", {"title": "workspace-t", "usetype": "workspace"})
        pids = [
            _post(admin, "/access/principals", {"name": f"ws-writer-{i}-{time.time_ns()}"})["id"]
            for i in range(2)
        ]
        tokens = []
        for pid in pids:
            _post(
                admin,
                f"/access/documents/{ws['id']}/grants",
                {"principal_id": pid, "level": "write"},
            )
            tokens.append(_post(admin, f"/access/principals/{pid}/tokens", {})["token"])
    with shared_server.client(tokens[0]) as one, shared_server.client(tokens[1]) as two:
        plan = _post(one, "/documents", {"parent_id": ws["id"], "title": "plan", "content": "v1"})
        note = _post(two, "/documents", {"parent_id": ws["id"], "title": "note", "content": "n"})
        plan2 = _post(
            two,
            "/documents",
            {"parent_id": ws["id"], "title": "plan", "content": "v2", "supersedes": plan["id"]},
        )
        assert one.patch(f"/documents/{plan['id']}", json={"content": "edit"}).status_code == 409
        assert two.delete(f"/documents/{note['id']}").status_code == 409
        view = one.get(f"/workspace/{ws['id']}").json()
        assert [d["id"] for d in view["current"]] == [note["id"], plan2["id"]]
        assert view["superseded"] == [plan["id"]] and view["records"] == 3
        hits = _post(one, "/search/fulltext", {"query": "plan", "roots": [ws["id"]]})["results"]
        assert [h["id"] for h in hits] == [plan2["id"]]  # superseded records are history
        outside = _post(
            one, "/documents", {"parent_id": ws["id"], "title": "x", "supersedes": 10**9}, 404
        )
        assert "not found" in outside["detail"]


def test_triples_are_bitemporal(shared_server: ServerProcess) -> None:
    with shared_server.client() as admin:
        ada = _post(admin, "/documents", {"title": "Ada L", "usetype": "entity"})
        pred = _post(admin, "/triples/predicates", {"name": f"works_at-{time.time_ns()}"})
        first = _post(
            admin,
            "/triples",
            {
                "subject_id": ada["id"],
                "predicate_id": pred["id"],
                "object_literal": "Analytical Co",
                "valid_from": "2020-01-01T00:00:00Z",
                "fact_type": "state",
            },
        )
        time.sleep(0.01)
        between = datetime.now(UTC).isoformat()
        time.sleep(0.01)
        second = _post(
            admin,
            f"/triples/{first['id']}/supersede",
            {
                "subject_id": ada["id"],
                "predicate_id": pred["id"],
                "object_literal": "Engine Ltd",
                "valid_from": "2024-06-01T00:00:00Z",
                "fact_type": "state",
                "reason": "moved",
            },
        )
        old = admin.get(f"/triples/{first['id']}").json()
        assert old["valid_until"].startswith("2024-06-01") and old["invalidated_by"] == second["id"]

        def objects(**params: Any) -> list[str]:
            rows = admin.get("/triples/query", params={"entity_id": ada["id"], **params}).json()
            return sorted(r["object_literal"] for r in rows)

        assert objects() == ["Analytical Co", "Engine Ltd"]  # both remain
        assert objects(as_of=between) == ["Analytical Co"]  # what we believed then
        assert objects(include_invalidated="false") == ["Engine Ltd"]
        assert objects(valid_at="2022-01-01T00:00:00Z") == ["Analytical Co"]
        assert objects(valid_at="2025-01-01T00:00:00Z") == ["Engine Ltd"]
        again = admin.post(
            f"/triples/{first['id']}/supersede",
            json={"subject_id": ada["id"], "predicate_id": pred["id"], "object_literal": "x"},
        )
        assert again.status_code == 409
        gone = _post(admin, f"/triples/{second['id']}/invalidate", {"reason": "retracted"})
        assert gone["invalidation_reason"] == "retracted"
        assert objects(include_invalidated="false") == []
        bad = admin.post(
            "/triples",
            json={"subject_id": ada["id"], "predicate_id": pred["id"]},
        )
        assert bad.status_code == 400 and "exactly one" in bad.json()["detail"]


def test_batch_create_is_atomic_and_findable(shared_server: ServerProcess) -> None:
    with shared_server.client() as admin:
        root = _post(admin, "/documents", {"title": "batch-root"})
        docs = [
            {"parent_id": root["id"], "title": f"b{i}", "content": f"batch walrus fact {i}"}
            for i in range(3)
        ]
        created = _post(admin, "/documents/batch", {"documents": docs})
        hits = _post(admin, "/search/fulltext", {"query": "walrus", "parent_id": root["id"]})
        assert {h["id"] for h in hits["results"]} == {d["id"] for d in created}
        broken = [*docs, {"parent_id": 10**12, "title": "orphan", "content": "batch narwhal"}]
        assert admin.post("/documents/batch", json={"documents": broken}).status_code == 404
        after = _post(admin, "/search/fulltext", {"query": "narwhal"})
        assert after["results"] == []
        children = admin.get(f"/documents/{root['id']}/children").json()
        assert len(children) == 3  # the refused batch left nothing behind
