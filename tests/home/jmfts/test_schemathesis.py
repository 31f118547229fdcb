"""Schemathesis over our OpenAPI schema against a live server: zero 5xx, any input."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from tests.home.jmfts.conftest import ServerProcess

EXAMPLES_PER_OPERATION = 25


def test_no_server_errors(server: ServerProcess) -> None:
    with server.client() as admin:  # some real documents, so ids in the fuzz hit rows
        root = admin.post("/documents", json={"title": "fuzz", "content": "seed"}).json()
        admin.post("/documents", json={"parent_id": root["id"], "title": "child"})
        admin.post("/documents", json={"title": "workspace", "usetype": "workspace"})
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    failures: list[tuple[str, int, str]] = []
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        for bearer, examples in ((server.admin_token, EXAMPLES_PER_OPERATION), ("jm_1_x", 3)):
            headers = {"Authorization": f"Bearer {bearer}"}

            @given(case=operation.as_strategy())
            @settings(
                max_examples=examples,
                deadline=None,
                database=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def exercise(case: Any) -> None:
                nonlocal calls
                calls += 1
                response = case.call(headers=headers, timeout=60)  # noqa: B023 - run at once
                if response.status_code >= 500:
                    failures.append((operation.label, response.status_code, response.text[:500]))  # noqa: B023

            exercise()
    assert calls > 300
    assert not failures, failures[:5]
