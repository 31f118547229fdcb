"""Hostile requests get a clean 4xx naming what was wrong, never a 500 (issue 23, item 10)."""

from __future__ import annotations

import json

import httpx

from home.jmfts.models import MAX_OBJECT_WEIGHT, MAX_TITLE_CHARS, MAX_USETYPE_CHARS
from tests.home.jmfts.conftest import ServerProcess


def _raw_bearer(server: ServerProcess, token: bytes) -> httpx.Response:
    """A request whose Authorization header carries bytes a well-behaved client never would."""
    with httpx.Client(base_url=server.url, timeout=60.0) as client:
        return client.get("/documents/1", headers={b"Authorization": b"Bearer " + token})


def test_malformed_token_ids_are_unauthorized(shared_server: ServerProcess) -> None:
    """Before: a superscript digit was a 500 (int('²')), an oversized id a 400 (SQLite)."""
    for token in (b"jm_\xb2_x", b"jm_1\xb2_x", b"jm_" + b"9" * 40 + b"_x"):
        response = _raw_bearer(shared_server, token)
        assert response.status_code == 401, (token, response.text)
        assert response.json()["detail"] == "the bearer token is malformed"


def _post_raw(server: ServerProcess, path: str, body: str) -> httpx.Response:
    with server.client() as admin:
        return admin.post(path, content=body, headers={"Content-Type": "application/json"})


def test_a_lone_surrogate_is_refused_naming_the_field(shared_server: ServerProcess) -> None:
    """Before: a 500 on each of these routes (the default 422 echoed the unencodable input)."""
    cases = {
        "/documents": ('{"title": "t", "content": "a\\ud800b"}', "content"),
        "/search/vector": ('{"query": "\\ud800"}', "query"),
        "/search/hybrid": ('{"query": "x\\udfff"}', "query"),
    }
    for path, (body, field) in cases.items():
        response = _post_raw(shared_server, path, body)
        assert response.status_code == 422, (path, response.text)
        [error] = response.json()["detail"]
        assert error["loc"] == ["body", field]
        assert "unicode" in error["msg"] or "lone surrogate" in error["msg"]
    surrogate_key = '{"title": "t", "structured_content": {"\\ud800": 1}}'
    response = _post_raw(shared_server, "/documents", surrogate_key)
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "structured_content"]
    assert "lone surrogate" in error["msg"]


def test_every_field_of_a_document_is_bounded(shared_server: ServerProcess) -> None:
    """Before: only content had a limit (10M-character titles, 10 MB structured_content)."""
    oversized = {
        "title": "t" * (MAX_TITLE_CHARS + 1),
        "usetype": "u" * (MAX_USETYPE_CHARS + 1),
        "structured_content": {"notes": ["n" * 1000] * (MAX_OBJECT_WEIGHT // 1000)},
    }
    with shared_server.client() as admin:
        for field, value in oversized.items():
            response = admin.post("/documents", json={"content": "c", field: value})
            assert response.status_code == 422, (field, response.text[:200])
            assert response.json()["detail"][0]["loc"] == ["body", field]
        batch = {"documents": [{"title": "t" * (MAX_TITLE_CHARS + 1)}]}
        response = admin.post("/documents/batch", json=batch)
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["body", "documents", 0, "title"]
        fine = admin.post("/documents", json={"title": "t" * MAX_TITLE_CHARS, "content": "ok"})
        assert fine.status_code == 200, fine.text
    assert json.loads(fine.text)["title"] == "t" * MAX_TITLE_CHARS


def test_a_deeply_nested_object_is_refused_not_stored(shared_server: ServerProcess) -> None:
    """Before: 500 levels of structured_content were stored, then every answer carrying
    the document failed to serialize (a 500 on its own POST, and after)."""
    body = '{"title": "deep", "structured_content": {"x": ' + "[" * 500 + "]" * 500 + "}}"
    response = _post_raw(shared_server, "/documents", body)
    assert response.status_code == 422, response.text[:200]
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "structured_content"]
    assert "nests deeper than 32 levels" in error["msg"]
    with shared_server.client() as admin:
        titles = [d["title"] for d in admin.get("/documents/roots").json()]
    assert "deep" not in titles
