"""``home memory`` against a running server, and the ``JmftsServer`` component lifecycle."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx

from home.jmfts.config import JmftsConfig
from home.jmfts.server import JmftsServer
from tests.home.jmfts.conftest import ServerProcess

CLI_TIMEOUT_S = 120


def admin_token(server: ServerProcess) -> Path:
    """Where a standalone `home jmfts serve --data-dir DIR` keeps its admin token."""
    return server.data_dir / "admin.token"


def _home(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    home = Path(sys.executable).with_name("home")
    return subprocess.run(
        [str(home), "memory", *args, "--url", server.url, "--token-file", str(admin_token(server))],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_memory_cli_put_search_get_tree_grant_token_triples(server: ServerProcess) -> None:
    token_file = admin_token(server)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    put = _home(server, "put", "workspace/notes/x", "The boiler service is due in March", "--json")
    assert put.returncode == 0, put.stderr
    doc = json.loads(put.stdout)
    assert doc["title"] == "x" and doc["depth"] == 2
    again = _home(server, "put", "workspace/notes/x", "The boiler service moved to April", "--json")
    assert json.loads(again.stdout)["supersedes"] == doc["id"]  # workspace: appended

    for method in ("vector", "fulltext", "hybrid"):
        found = _home(server, "search", "boiler service", "--method", method, "--json")
        assert found.returncode == 0, found.stderr
        results = json.loads(found.stdout)["results"]
        assert results[0]["path"] == "workspace/notes/x"
        assert "April" in results[0]["snippet"]
        assert {"id", "path", "title", "snippet", "score", "usetype", "created_at", "age"} <= set(
            results[0]
        )

    got = _home(server, "get", "workspace/notes/x", "--json")
    assert json.loads(got.stdout)["content"] == "The boiler service moved to April"
    tree = _home(server, "tree", "--json")
    assert json.loads(tree.stdout)["trees"][0]["root"]["title"] == "workspace"

    grant = _home(server, "grant", "workspace", "agent-one", "--level", "write", "--json")
    assert grant.returncode == 0 and json.loads(grant.stdout)["level"] == "write"
    minted = _home(server, "token", "agent-one", "--json")
    agent_token = json.loads(minted.stdout)["token"]
    with server.client(agent_token) as agent:
        assert agent.get(f"/documents/{doc['id']}").status_code == 200

    added = _home(server, "triples", "add", "workspace/notes", "about", "boilers", "--json")
    assert added.returncode == 0, added.stderr
    listed = _home(server, "triples", "list", "workspace/notes", "--json")
    assert [t["object_literal"] for t in json.loads(listed.stdout)["triples"]] == ["boilers"]


def test_memory_cli_search_by_kind(server: ServerProcess) -> None:
    likes = "The user loves gooseberry jam."
    bought = "The user bought gooseberry jam at the market."
    for text, kind in ((likes, "preference"), (bought, "fact")):
        put = _home(server, "put", f"kinds/{kind}", text, "--usetype", f"memory:{kind}")
        assert put.returncode == 0, put.stderr
    both = _home(server, "search", "gooseberry jam", "--json")
    assert {likes, bought} <= {hit["snippet"] for hit in json.loads(both.stdout)["results"]}
    found = _home(server, "search", "gooseberry jam", "--kind", "preference", "--json")
    assert found.returncode == 0, found.stderr
    assert [hit["snippet"] for hit in json.loads(found.stdout)["results"]] == [likes]
    # A memory kept before kinds (no usetype) is a fact; a record is no memory at all.
    legacy = "The user made gooseberry jam last summer."
    assert _home(server, "put", "kinds/legacy", legacy).returncode == 0
    note = "Gooseberry jam recipe notes."
    assert _home(server, "put", "kinds/note", note, "--usetype", "record").returncode == 0
    facts = _home(server, "search", "gooseberry jam", "--kind", "fact", "--json")
    assert {hit["snippet"] for hit in json.loads(facts.stdout)["results"]} == {bought, legacy}
    unknown = _home(server, "search", "gooseberry jam", "--kind", "hobby")
    assert unknown.returncode == 2 and "--kind hobby" in unknown.stderr, unknown.stderr


def test_memory_cli_exit_codes(server: ServerProcess) -> None:
    assert _home(server, "get", "no/such/path").returncode == 1
    assert _home(server, "search", "x", "--method", "nonsense").returncode == 2
    unreachable = subprocess.run(
        [
            str(Path(sys.executable).with_name("home")),
            "memory",
            "get",
            "x",
            "--url",
            "http://127.0.0.1:9",
            "--token-file",
            str(admin_token(server)),
        ],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    assert unreachable.returncode == 1 and "cannot reach" in unreachable.stderr


async def test_component_start_health_stop(tmp_path: Path, onnx_cache: Path) -> None:
    server = JmftsServer(JmftsConfig(data_dir=tmp_path / "jm", port=0, onnx_cache=onnx_cache))
    async with server:
        host, port = server.address
        assert host == "127.0.0.1" and port > 0
        assert await server.health()
        assert server.admin_token_file is not None
        token = server.admin_token_file.read_text().strip()
        async with httpx.AsyncClient(base_url=server.url) as client:
            created = await client.post(
                "/documents",
                json={"title": "component", "content": "hello"},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert created.status_code == 200
            docs = await client.get("/docs")
            assert docs.status_code == 200
    assert not await server.health()
    async with JmftsServer(JmftsConfig(data_dir=tmp_path / "jm", port=0)) as reopened:
        assert reopened.store is not None and not reopened.store.index_rebuilt  # saved at stop
        assert reopened.store.index.count == 1
