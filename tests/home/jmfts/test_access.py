"""The access matrix: every endpoint x (granted, not granted, bad token, no token).

A document the principal was not granted must answer exactly like an id that never
existed (same status, same body but for the id), and must never appear in, or be counted
by, any listing or search.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.home.jmfts.conftest import ServerProcess

NEVER_EXISTED = 987_654_321


@dataclass
class World:
    """Documents and tokens for one matrix row."""

    read_root: int  # alice: read
    read_child: int
    write_root: int  # alice: write
    write_child: int
    hidden_root: int  # alice: nothing
    hidden_child: int
    marker: str  # a word only the hidden documents contain
    alice: str
    alice_id: int
    predicate: int


def _create(admin: httpx.Client, **body: Any) -> int:
    response = admin.post("/documents", json=body)
    assert response.status_code == 200, response.text
    return int(response.json()["id"])


@pytest.fixture
def world(shared_server: ServerProcess) -> World:
    marker = "zx" + uuid.uuid4().hex[:10]
    with shared_server.client() as admin:
        read_root = _create(admin, title="shared notes", content="the read-only root")
        read_child = _create(admin, parent_id=read_root, title="apple", content="apple pie recipe")
        write_root = _create(admin, title="alice desk", content="alice writes here")
        write_child = _create(admin, parent_id=write_root, title="todo", content="buy apples")
        hidden_root = _create(admin, title=f"private {marker}", content=f"{marker} diary")
        hidden_child = _create(
            admin, parent_id=hidden_root, title=f"secret {marker}", content=f"apple {marker}"
        )
        alice_id = admin.post("/access/principals", json={"name": f"alice-{marker}"}).json()["id"]
        minted = admin.post(f"/access/principals/{alice_id}/tokens", json={"label": "t"}).json()
        for doc, level in ((read_root, "read"), (write_root, "write")):
            grant = admin.post(
                f"/access/documents/{doc}/grants", json={"principal_id": alice_id, "level": level}
            )
            assert grant.status_code == 200, grant.text
        predicate = admin.post("/triples/predicates", json={"name": f"likes-{marker}"}).json()["id"]
    return World(
        read_root,
        read_child,
        write_root,
        write_child,
        hidden_root,
        hidden_child,
        marker,
        minted["token"],
        alice_id,
        predicate,
    )


def _search(kind: str) -> tuple[str, str, Any]:
    return ("POST", f"/search/{kind}", lambda d: {"query": "apple", "parent_id": d})


#: (name, method, path template, body builder or None, is_write, granted status)
ENDPOINTS: list[tuple[str, str, str, Any, bool, int]] = [
    ("get", "GET", "/documents/{d}", None, False, 200),
    ("get+embed", "GET", "/documents/{d}?include_embed=true", None, False, 200),
    ("children", "GET", "/documents/{d}/children", None, False, 200),
    ("descendants", "GET", "/documents/{d}/children?depth=-1", None, False, 200),
    ("subtree", "GET", "/documents/{d}/subtree", None, False, 200),
    ("ancestors", "GET", "/documents/{d}/ancestors", None, False, 200),
    ("list", "GET", "/documents?parent_id={d}", None, False, 200),
    ("triples", "GET", "/triples/query?entity_id={d}", None, False, 200),
    ("workspace", "GET", "/workspace/{d}", None, False, 400),  # not a workspace: 400
    ("grants", "GET", "/access/documents/{d}/grants", None, False, 403),  # owner only
    *[(f"search-{k}", *_search(k), False, 200) for k in ("vector", "fulltext", "bm25", "hybrid")],
    ("search-roots", "POST", "/search/vector", lambda d: {"query": "x", "roots": [d]}, False, 200),
    ("create-under", "POST", "/documents", lambda d: {"parent_id": d, "title": "n"}, True, 200),
    ("update", "PATCH", "/documents/{d}", lambda d: {"content": "changed"}, True, 200),
    ("embed", "POST", "/documents/{d}/embed", None, True, 200),
    (
        "triple",
        "POST",
        "/triples",
        lambda d: {"subject_id": d, "predicate_id": 0, "object_literal": "x"},
        True,
        200,
    ),
    ("delete", "DELETE", "/documents/{d}", None, True, 200),
]


def _call(
    client: httpx.Client, endpoint: tuple[Any, ...], doc: int, world: World
) -> httpx.Response:
    _, method, template, body, _, _ = endpoint
    payload = body(doc) if body else None
    if payload is not None and "predicate_id" in payload:
        payload["predicate_id"] = world.predicate
    return client.request(method, template.format(d=doc), json=payload)


def _leaks(response: httpx.Response, world: World) -> bool:
    return world.marker in response.text


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[e[0] for e in ENDPOINTS])
def test_matrix(shared_server: ServerProcess, world: World, endpoint: tuple[Any, ...]) -> None:
    _, _, _, _, is_write, granted_status = endpoint
    granted_doc = world.write_child if is_write else world.read_child
    with shared_server.client(world.alice) as alice:
        granted = _call(alice, endpoint, granted_doc, world)
        assert granted.status_code == granted_status, granted.text
        assert not _leaks(granted, world)

        if is_write:  # visible but read-only: 403, never 404, never 200
            read_only = _call(alice, endpoint, world.read_child, world)
            assert read_only.status_code == 403, read_only.text

        for hidden in (world.hidden_root, world.hidden_child):
            refused = _call(alice, endpoint, hidden, world)
            absent = _call(alice, endpoint, NEVER_EXISTED, world)
            assert refused.status_code == 404, refused.text
            assert absent.status_code == 404, absent.text
            assert refused.text.replace(str(hidden), "ID") == absent.text.replace(
                str(NEVER_EXISTED), "ID"
            )
            assert not _leaks(refused, world)

    with shared_server.client("jm_1_not-a-real-secret") as bad:
        assert _call(bad, endpoint, granted_doc, world).status_code == 401
    with shared_server.client("") as anonymous:
        response = _call(anonymous, endpoint, granted_doc, world)
        assert response.status_code == 401
        assert response.headers.get("www-authenticate") == "Bearer"


@pytest.mark.parametrize("method", ["vector", "fulltext", "bm25", "hybrid"])
def test_search_never_returns_or_counts_ungranted(
    shared_server: ServerProcess, world: World, method: str
) -> None:
    with shared_server.client(world.alice) as alice:
        body = {"query": f"apple {world.marker} diary", "limit": 100}
        response = alice.post(f"/search/{method}", json=body)
    assert response.status_code == 200
    payload = response.json()
    ids = {hit["id"] for hit in payload["results"]}
    assert not ids & {world.hidden_root, world.hidden_child}
    assert payload["total"] == len(payload["results"])
    assert world.marker not in response.text
    with shared_server.client() as admin:  # the owner does find them: the filter is access
        found = admin.post(f"/search/{method}", json=body).json()["results"]
    assert {world.hidden_root, world.hidden_child} & {hit["id"] for hit in found}


def test_listings_and_totals_hide_ungranted(shared_server: ServerProcess, world: World) -> None:
    with shared_server.client(world.alice) as alice:
        roots = alice.get("/documents/roots").json()
        listed = alice.get("/documents", params={"limit": 1000}).json()
        subtree = alice.get(f"/documents/{world.read_root}/subtree").json()
        ancestors = alice.get(f"/documents/{world.read_child}/ancestors").json()
    assert {d["id"] for d in roots} == {world.read_root, world.write_root}
    visible = {d["id"] for d in listed}
    assert visible == {world.read_root, world.read_child, world.write_root, world.write_child}
    assert subtree["total"] == 2
    assert [d["id"] for d in ancestors] == [world.read_root]


def test_admin_routes_are_owner_only(shared_server: ServerProcess, world: World) -> None:
    with shared_server.client(world.alice) as alice:
        assert alice.get("/access/principals").status_code == 403
        assert alice.post("/access/principals", json={"name": "mallory"}).status_code == 403
        assert alice.post(f"/access/principals/{world.alice_id}/tokens", json={}).status_code == 403
        assert alice.post("/documents", json={"title": "new root"}).status_code == 403


def test_revoked_token_is_refused(shared_server: ServerProcess, world: World) -> None:
    with shared_server.client() as admin:
        minted = admin.post(f"/access/principals/{world.alice_id}/tokens", json={}).json()
        with shared_server.client(minted["token"]) as holder:
            assert holder.get(f"/documents/{world.read_root}").status_code == 200
            assert admin.delete(f"/access/tokens/{minted['id']}").status_code == 200
            assert holder.get(f"/documents/{world.read_root}").status_code == 401
        tokens = admin.get(f"/access/principals/{world.alice_id}/tokens").json()
    assert all("token" not in t for t in tokens)  # only metadata ever comes back


def test_health_needs_no_token_and_tells_nothing(shared_server: ServerProcess) -> None:
    with shared_server.client("") as anonymous:
        health = anonymous.get("/").json()
    assert health["status"] == "ok"
    assert health["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert set(health) == {
        "status",
        "version",
        "database",
        "embedding_model",
        "llm",
        "implementation",
    }  # nothing about the corpus


def test_triple_routes_follow_their_documents(shared_server: ServerProcess, world: World) -> None:
    with shared_server.client() as admin:

        def triple(subject: int) -> int:
            body = {"subject_id": subject, "predicate_id": world.predicate, "object_literal": "v"}
            response = admin.post("/triples", json=body)
            assert response.status_code == 200, response.text
            return int(response.json()["id"])

        readable, hidden = triple(world.read_child), triple(world.hidden_child)
        pointing = admin.post(
            "/triples",
            json={
                "subject_id": world.read_child,
                "predicate_id": world.predicate,
                "object_id": world.hidden_child,
            },
        ).json()["id"]
    successor = {
        "subject_id": world.read_child,
        "predicate_id": world.predicate,
        "object_literal": "w",
    }
    with shared_server.client(world.alice) as alice:
        assert alice.get(f"/triples/{readable}").status_code == 200
        assert alice.post(f"/triples/{readable}/invalidate", json={}).status_code == 403
        assert alice.post(f"/triples/{readable}/supersede", json=successor).status_code == 403
        assert alice.delete(f"/triples/{readable}").status_code == 403
        for secret in (hidden, pointing):  # a hidden subject or a hidden object hides it
            assert alice.get(f"/triples/{secret}").status_code == 404
            assert alice.post(f"/triples/{secret}/invalidate", json={}).status_code == 404
            assert alice.post(f"/triples/{secret}/supersede", json=successor).status_code == 404
            assert alice.delete(f"/triples/{secret}").status_code == 404
        listed = alice.get("/triples/query", params={"predicate_id": world.predicate}).json()
    assert [t["id"] for t in listed] == [readable]
    # Predicates are global vocabulary (this one's name carries the marker); documents are not.
    assert f"secret {world.marker}" not in str(listed)
    assert f"{world.marker} diary" not in str(listed)


def _agent(admin: httpx.Client, name: str) -> tuple[int, str]:
    principal = admin.post("/access/principals", json={"name": name}).json()["id"]
    token = admin.post(f"/access/principals/{principal}/tokens", json={"label": "t"}).json()
    return int(principal), str(token["token"])


def test_one_agent_never_lists_anothers_private_predicates(
    shared_server: ServerProcess, world: World
) -> None:
    """Before: predicates were global, so any principal listed every agent's names."""
    with shared_server.client() as admin:
        bob_id, bob_token = _agent(admin, f"bob-{world.marker}")
        bob_desk = _create(admin, title="bob desk", content="bob writes here")
        grant = {"principal_id": bob_id, "level": "write"}
        assert admin.post(f"/access/documents/{bob_desk}/grants", json=grant).status_code == 200
    with shared_server.client(bob_token) as bob:
        secret = bob.post("/triples/predicates", json={"name": f"fears-{world.marker}"})
        assert secret.status_code == 200, secret.text
        secret_id = secret.json()["id"]
        assert secret_id in [p["id"] for p in bob.get("/triples/predicates").json()]
        fact = {"subject_id": bob_desk, "predicate_id": secret_id, "object_literal": "spiders"}
        assert bob.post("/triples", json=fact).status_code == 200
    with shared_server.client(world.alice) as alice:
        listed = alice.get("/triples/predicates")
        assert listed.status_code == 200
        assert world.predicate in [p["id"] for p in listed.json()], "the owner's are shared"
        assert f"fears-{world.marker}" not in listed.text
        hidden = alice.get(f"/triples/predicates/{secret_id}")
        absent = alice.get(f"/triples/predicates/{NEVER_EXISTED}")
        assert (hidden.status_code, absent.status_code) == (404, 404)
        assert hidden.text.replace(str(secret_id), "ID") == absent.text.replace(
            str(NEVER_EXISTED), "ID"
        )
        used = {"subject_id": world.write_child, "predicate_id": secret_id, "object_literal": "x"}
        assert alice.post("/triples", json=used).status_code == 404
        own = alice.post("/triples/predicates", json={"name": f"enjoys-{world.marker}"})
        assert own.json()["id"] in [p["id"] for p in alice.get("/triples/predicates").json()]
