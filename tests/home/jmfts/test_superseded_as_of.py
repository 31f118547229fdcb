"""Superseded and retracted workspace records: gone from search now, found as of before."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import httpx

from home.jmfts.models import RETRACTION_USETYPE
from tests.home.jmfts.conftest import ServerProcess


def _post(client: httpx.Client, path: str, body: dict[str, Any], status: int = 200) -> Any:
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    return response.json()


def _ids(client: httpx.Client, query: str, root: int, as_of: datetime | None = None) -> list[int]:
    body: dict[str, Any] = {"query": query, "roots": [root], "threshold": 0.0}
    if as_of is not None:
        body["as_of"] = as_of.isoformat()
    return [h["id"] for h in _post(client, "/search/vector", body)["results"] if h["id"] != root]


def test_a_superseded_record_is_history_now_and_current_as_of_before(
    shared_server: ServerProcess,
) -> None:
    with shared_server.client() as admin:
        ws = _post(admin, "/documents", {"title": "ws-as-of", "usetype": "workspace"})
        old = _post(
            admin, "/documents", {"parent_id": ws["id"], "content": "The user's dog is Biscuit."}
        )
        time.sleep(0.01)
        before = datetime.now(UTC)
        time.sleep(0.01)
        new = _post(
            admin,
            "/documents",
            {"parent_id": ws["id"], "content": "The user's dog is Rex.", "supersedes": old["id"]},
        )
        assert _ids(admin, "dog", ws["id"]) == [new["id"]]
        assert _ids(admin, "dog", ws["id"], as_of=before) == [old["id"]]


def test_a_retraction_hides_its_record_and_is_itself_no_memory(
    shared_server: ServerProcess,
) -> None:
    with shared_server.client() as admin:
        ws = _post(admin, "/documents", {"title": "ws-retract", "usetype": "workspace"})
        kept = _post(admin, "/documents", {"parent_id": ws["id"], "content": "The user's cat."})
        gone = _post(admin, "/documents", {"parent_id": ws["id"], "content": "The user's boat."})
        time.sleep(0.01)
        before = datetime.now(UTC)
        time.sleep(0.01)
        _post(
            admin,
            "/documents",
            {
                "parent_id": ws["id"],
                "content": "retracted",
                "usetype": RETRACTION_USETYPE,
                "supersedes": gone["id"],
            },
        )
        assert _ids(admin, "the user's boat", ws["id"]) == [kept["id"]]
        assert gone["id"] in _ids(admin, "the user's boat", ws["id"], as_of=before)
        view = admin.get(f"/workspace/{ws['id']}").json()
        assert [d["id"] for d in view["current"]] == [kept["id"]]
