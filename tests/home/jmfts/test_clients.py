"""Wire compatibility: the real PyPI JMFTS clients drive our server.

``jmfts-client`` (RemoteJmftsClient + its contracts), ``ffwf-tau-jmfts``'s
``tau_jmfts.client.JmftsClient`` and its session store, and the ``tau`` CLI itself with
``--store jmfts`` (against a scripted OpenAI-compatible model server).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from jmfts_client import JmftsNotFound, RemoteJmftsClient
from jmfts_client.contracts.access import GrantCreate, PrincipalCreate, TokenCreate
from jmfts_client.contracts.document import DocumentCreate, DocumentUpdate
from jmfts_client.contracts.search import HybridSearchRequest, SearchRequest
from jmfts_client.contracts.triple import (
    PredicateCreate,
    TripleCreate,
    TripleSupersedRequest,
)
from tau_jmfts.catalog import JmftsSessionCatalog
from tau_jmfts.client import JmftsClient, JmftsError

from tests.home.jmfts.conftest import ServerProcess
from tests.support.scripted_model import Reply, ScriptedModel

TAU_TIMEOUT_S = 120


def test_jmfts_client_documents_tree_and_search(shared_server: ServerProcess) -> None:
    with RemoteJmftsClient(shared_server.url, token=shared_server.admin_token) as jm:
        root = jm.create_document(DocumentCreate(title="kb", content="knowledge base"))
        doc = jm.create_document(
            DocumentCreate(parent_id=root.id, title="otters", content="Sea otters hold hands")
        )
        assert doc.path == [root.id, doc.id] and doc.depth == 1
        got = jm.get_document(doc.id, include_embed=True)
        assert got.embed is not None and len(got.embed) == 384
        updated = jm.update_document(doc.id, DocumentUpdate(content="Sea otters sleep afloat"))
        assert updated.content == "Sea otters sleep afloat"
        assert [c.id for c in jm.get_children(root.id)] == [doc.id]
        sub = jm.get_subtree(root.id)
        assert sub.total == 2 and sub.root.path == [root.id]
        # Descendants are placed by parent_id and depth; their paths come when asked.
        assert [(d.id, d.parent_id, d.depth, d.path) for d in sub.descendants] == [
            (doc.id, root.id, 1, [])
        ]
        with shared_server.client() as http:
            asked = http.get(f"/documents/{root.id}/subtree", params={"paths": "true"}).json()
        assert [d["path"] for d in asked["descendants"]] == [[root.id, doc.id]]
        assert [a.id for a in jm.get_ancestors(doc.id)] == [root.id]
        assert root.id in {r.id for r in jm.get_root_documents()}
        assert doc.id in {d.id for d in jm.list_documents(parent_id=root.id)}
        for call in (jm.vector_search, jm.fulltext_search, jm.bm25_search):
            hits = call(SearchRequest(query="otters sleeping", parent_id=root.id)).results
            assert hits[0].document.id == doc.id
        fused = jm.hybrid_search(HybridSearchRequest(query="otters asleep", parent_id=root.id))
        assert fused.results[0].document.id == doc.id
        assert fused.applied is not None and fused.applied.methods == ["vector", "fulltext"]
        jm.delete_document(root.id)
        with pytest.raises(JmftsNotFound):
            jm.get_document(doc.id)


def test_jmfts_client_access_and_triples(shared_server: ServerProcess) -> None:
    with RemoteJmftsClient(shared_server.url, token=shared_server.admin_token) as jm:
        person = jm.create_document(DocumentCreate(title="Ada", usetype="entity"))
        bob = jm.create_principal(PrincipalCreate(name="bob-clients"))
        minted = jm.mint_token(bob.id, TokenCreate(label="bob"))
        grant = jm.grant(person.id, GrantCreate(principal_id=bob.id, level="read"))
        assert grant.level == "read" and [g.id for g in jm.list_grants(person.id)] == [grant.id]
        assert [t.id for t in jm.list_tokens(bob.id)] == [minted.id]
        predicate = jm.create_predicate(PredicateCreate(name="lives_in"))
        first = jm.create_triple(
            TripleCreate(subject_id=person.id, predicate_id=predicate.id, object_literal="London")
        )
        second = jm.supersede_triple(
            first.id,
            TripleSupersedRequest(
                subject_id=person.id, predicate_id=predicate.id, object_literal="Paris"
            ),
        )
        old = jm.get_triple(first.id)
        assert old.invalidated_by == second.id and old.valid_until is not None
        current = jm.query_triples(entity_id=person.id, include_invalidated=False)
        assert [t.object_literal for t in current] == ["Paris"]
        believed = jm.query_triples(entity_id=person.id, valid_at=None)
        assert {t.id for t in believed} == {first.id, second.id}
    with RemoteJmftsClient(shared_server.url, token=minted.token) as as_bob:
        assert as_bob.get_document(person.id).title == "Ada"
        assert [t.id for t in as_bob.query_triples(entity_id=person.id)] == [first.id, second.id]


def test_tau_jmfts_client(shared_server: ServerProcess) -> None:
    with JmftsClient(shared_server.url, token=shared_server.admin_token) as client:
        health = client.health()
        assert health["status"] == "ok"
        client.require_chunk_contract()  # our version satisfies τ's chunk contract check
        root = client.create_document(title="conv", usetype="tau:conversation", sequential=False)
        first = client.create_document(
            title="user — 0001",
            content="the garage code is 4512",
            parent_id=root["id"],
            usetype="tau:message",
            structured_content={"seq": 1},
            sequential=True,
        )
        second = client.create_document(
            title="assistant — 0002",
            content="noted",
            parent_id=root["id"],
            usetype="tau:message",
            sequential=True,
        )
        assert (first["position"], second["position"]) == (0, 1)
        client.update_document(root["id"], title="renamed", re_embed=False)
        assert client.get_document(root["id"])["content"] is None  # omitted fields kept
        assert client.get_subtree(root["id"])["total"] == 3
        assert client.get_roots()
        assert client.is_embedded(first["id"])
        assert client.embed_document(first["id"])["chunks"] == 1
        for method in ("vector", "fulltext", "bm25", "hybrid"):
            hits = client.search("garage code", method=method, parent_id=root["id"])
            assert hits[0]["document"]["id"] == first["id"], method
        client.delete_document(root["id"])
        with pytest.raises(JmftsError) as refused:
            client.get_document(root["id"])
        assert refused.value.status_code == 404


def test_tau_session_store_round_trip(shared_server: ServerProcess) -> None:
    """τ's own JMFTS session log writes a conversation and loads it back intact."""
    with JmftsClient(shared_server.url, token=shared_server.admin_token) as client:
        catalog = JmftsSessionCatalog(client)
        session = catalog.create("/tmp/work", model="scripted", backend="openai")

        async def converse() -> list[str]:
            asked = await session.append_at(
                None,
                "message",
                {"message": {"role": "user", "content": "where is the ladder?", "timestamp": 1}},
            )
            answered = await session.append_at(
                asked,
                "message",
                {"message": {"role": "assistant", "content": "in the shed", "timestamp": 2}},
            )
            return [asked, answered]

        entry_ids = asyncio.run(converse())
        assert session.root_doc_id is not None
        loaded = catalog.load(str(session.root_doc_id))
        assert loaded.header["id"] == session.header["id"]
        assert [e["id"] for e in loaded.entries() if e["id"] in entry_ids] == entry_ids
        assert any(info.id == session.id for info in catalog.list())
        hits = client.search("ladder location", method="hybrid", parent_id=session.root_doc_id)
        assert str(hits[0]["document"]["id"]) in entry_ids


@pytest.mark.slow
async def test_tau_cli_store_jmfts_session_is_found_by_search(
    shared_server: ServerProcess, tmp_path: Path
) -> None:
    tau_home = tmp_path / "tau-home"
    tau_home.mkdir()
    async with ScriptedModel(
        responder=lambda _: Reply.say("Noted: the spare key is under the blue flowerpot.")
    ) as scripted_model:
        config = {
            "models": {
                "scripted": {
                    "backend": "openai",
                    "model": "scripted",
                    "base_url": scripted_model.url,
                    "api_key": "not-needed",
                    "stream": False,
                }
            },
            "default_model": "scripted",
            "session_store": {
                "backend": "jmfts",
                "url": shared_server.url,
                "token": shared_server.admin_token,
            },
        }
        (tau_home / "config.json").write_text(json.dumps(config))
        env = {**os.environ, "TAU_HOME": str(tau_home)}
        env.pop("JMFTS_API_URL", None)
        env.pop("JMFTS_API_TOKEN", None)
        tau = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("tau")),
            "-p", "--store", "jmfts", "--no-tools", "--no-context-files", "--no-extensions",
            "Remember that the spare key is under the blue flowerpot",
            env=env, cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, stderr = await asyncio.wait_for(tau.communicate(), TAU_TIMEOUT_S)
    assert tau.returncode == 0, stderr.decode()[-3000:]
    assert scripted_model.requests, "tau never asked the model"
    with JmftsClient(shared_server.url, token=shared_server.admin_token) as client:
        hits = client.search("where did I put the spare key", method="vector", limit=5)
        conversations = client.list_documents(usetype="tau:conversation")
    assert conversations, "tau stored no conversation root"
    texts = [hit["document"]["content"] or "" for hit in hits]
    assert any("blue flowerpot" in text for text in texts), texts
    found_in = {
        hit["document"]["path"][0]
        for hit in hits
        if "flowerpot" in (hit["document"]["content"] or "")
    }
    assert found_in & {c["id"] for c in conversations}
    stamp = datetime.now(UTC)
    assert all(datetime.fromisoformat(c["created_at"]) <= stamp for c in conversations)
