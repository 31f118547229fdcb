"""Fuzzing JMFTS's HTTP surface: request bodies, query strings and the bearer header.

The app in process (FastAPI's TestClient over a real store and the real
embedder). Whatever arrives, the answer is a 2xx or a named 4xx, counted in
``app.state.answers``; never a 500, never an exception out of the app, and a good
request right after is served. The slowest request is reported
(tests/support/fuzz_report.py), not asserted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from home.jmfts.app import create_app
from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.store import DocumentStore
from tests.support import json_strategy
from tests.support.fuzz_report import Slowest, report

HTTP = Slowest("jmfts http")
HEADERS = Slowest("jmfts bearer header")


@pytest.fixture(scope="module", autouse=True)
def slowest_cases() -> Iterator[None]:
    yield
    report(HTTP, HEADERS)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, onnx_cache: Path) -> Iterator[FastAPI]:
    data_dir = tmp_path_factory.mktemp("jmfts")
    store = DocumentStore(data_dir, OnnxMiniLM(onnx_cache))
    store.bootstrap_admin()
    try:
        yield create_app(store)
    finally:
        store.close()


@pytest.fixture(scope="module")
def admin(app: FastAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    token = next(tmp_path_factory.getbasetemp().glob("jmfts*/admin.token")).read_text().strip()
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        first = client.post("/documents", json={"title": "root", "content": "a first note"})
        assert first.status_code == 200, first.text
        yield client


json_values = json_strategy.json_values(
    text_size=30,
    extra=st.sampled_from([2**63, -(2**63) - 1, 10**40, "\ud800", "9999-12-31T23:59:59Z"]),
)
FIELDS = [
    "title", "content", "parent_id", "usetype", "structured_content", "supersedes",
    "event_time", "query", "limit", "threshold", "roots", "usetype", "exclude_types",
    "subject_id", "predicate_id", "object_id", "object_literal", "valid_from", "name",
    "namespace", "iri", "principal_id", "level", "label", "documents", "x",
]  # fmt: skip
ROUTES = [
    ("POST", "/documents"),
    ("POST", "/documents/batch"),
    ("PATCH", "/documents/1"),
    ("POST", "/search/vector"),
    ("POST", "/search/fulltext"),
    ("POST", "/search/hybrid"),
    ("POST", "/triples"),
    ("POST", "/triples/predicates"),
    ("POST", "/access/principals"),
    ("POST", "/access/documents/1/grants"),
]
bodies = (
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6).map(json.dumps)
    | st.text(max_size=100)
    | st.sampled_from(["", "[", "null", "[" * 5000 + "]" * 5000, '{"title": "\\ud800"}'])
)
queries = st.dictionaries(
    st.sampled_from(["parent_id", "limit", "offset", "depth", "entity_id", "valid_at", "x"]),
    st.text(max_size=12) | st.integers().map(str),
    max_size=3,
)
GET_ROUTES = ["/documents", "/documents/1", "/documents/1/children", "/triples/query"]


def _still_served(admin: TestClient, app: FastAPI) -> None:
    assert admin.get("/").status_code == 200
    good = admin.post("/documents", json={"title": "next", "content": "still served"})
    assert good.status_code == 200, good.text
    assert app.state.answers["internal"] == 0


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(ROUTES), bodies)
def test_any_body_is_answered_or_refused_with_a_4xx(
    app: FastAPI, admin: TestClient, route: tuple[str, str], body: str
) -> None:
    method, path = route
    with HTTP.timed((method, path, body)):
        response = admin.request(
            method, path, content=body.encode("utf-8", "surrogatepass"),
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
    assert response.status_code < 500, (method, path, body, response.text)
    _still_served(admin, app)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(GET_ROUTES), queries)
def test_any_query_string_is_answered_or_refused_with_a_4xx(
    app: FastAPI, admin: TestClient, path: str, params: dict[str, Any]
) -> None:
    with HTTP.timed((path, params)):
        response = admin.get(path, params=params)
    assert response.status_code < 500, (path, params, response.text)
    _still_served(admin, app)


header_values = (
    st.binary(max_size=80).filter(lambda b: b"\n" not in b and b"\r" not in b)
    | st.sampled_from([b"jm_\xb2_x", b"jm_" + b"9" * 40 + b"_x", b"jm_1_", b"jm__", b"x" * 8000])
).map(lambda token: b"Bearer " + token)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(header_values)
def test_any_bearer_header_is_unauthorized_never_a_500(
    app: FastAPI, admin: TestClient, header: bytes
) -> None:
    with TestClient(app) as anyone, HEADERS.timed(header):
        response = anyone.get("/documents/1", headers={b"Authorization": header.strip()})
    assert response.status_code in (400, 401, 404), (header, response.text)
    _still_served(admin, app)


def test_an_unexpected_failure_is_a_counted_500_and_the_next_request_served(
    app: FastAPI, admin: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("a bug in the store")

    monkeypatch.setattr("home.jmfts.routes.workspace.workspace_view", broken)
    first = admin.post("/documents", json={"title": "ws", "usetype": "workspace"}).json()["id"]
    internal = app.state.answers["internal"]
    response = admin.get(f"/workspace/{first}")
    assert (response.status_code, response.json()) == (500, {"detail": "internal error"})
    assert app.state.answers["internal"] == internal + 1
    monkeypatch.undo()
    app.state.answers["internal"] -= 1  # deliberate: the others assert none of their own
    _still_served(admin, app)
