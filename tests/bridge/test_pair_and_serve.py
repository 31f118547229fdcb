"""`bridge pair` (keys, halves that pass `bridge check`) and `bridge serve` (frames on stdio)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import stat
import sys
from pathlib import Path

import jsonschema
import nats
import pytest
import yaml
from typer.testing import CliRunner

from bridge.check import check_pair as run_check
from bridge.check import has_errors
from bridge.cli import app
from bridge.errors import HelloRefused, LinkError, PairError
from bridge.node import BridgeCore
from bridge.pair import pair, parse_home
from shared.schema import SubjectDecl, load_bridge_half
from tests.bridge.servers import Collector, Paired, wait_until
from tests.bridge.test_link import turn


def test_pair_writes_halves_that_pass_check(paired: Paired) -> None:
    assert not has_errors(run_check(paired.edge, paired.home))
    assert paired.edge.endpoint.host_key == paired.home.endpoint.host_key
    assert paired.edge.endpoint.client_key == paired.home.endpoint.client_key
    for key in (paired.result.client_key, paired.result.host_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert "PRIVATE KEY" in key.read_text()
    assert stat.S_IMODE(paired.result.client_key.parent.stat().st_mode) == 0o700
    schema = json.loads(Path("schemas/json/bridge-half.schema.json").read_text())
    for half in (paired.result.edge_half, paired.result.home_half):
        assert "PRIVATE" not in half.read_text()
        jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(half.read_text()))


def test_pair_reuses_the_host_key_and_refuses_to_overwrite(tmp_path: Path) -> None:
    first = pair("board", "home.lan", tmp_path)
    second = pair("kitchen", "home.lan:2200", tmp_path)
    assert first.host_key_created and not second.host_key_created
    assert first.host_fingerprint == second.host_fingerprint
    assert first.client_fingerprint != second.client_fingerprint
    assert load_bridge_half(second.edge_half).endpoint.port == 2200
    with pytest.raises(PairError, match="already exist"):
        pair("board", "home.lan", tmp_path)
    assert pair("board", "home.lan", tmp_path, force=True).client_fingerprint != (
        first.client_fingerprint
    )


def test_pair_never_writes_keys_under_schemas(tmp_path: Path) -> None:
    with pytest.raises(PairError, match="under schemas/"):
        pair("board", "home.lan", tmp_path / "schemas" / "bridge")
    result = pair("board", "home.lan", tmp_path / "schemas" / "bridge", secrets=tmp_path / "keys")
    assert result.client_key.parent == tmp_path / "keys"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("home.lan", ("home.lan", 2222)),
        ("10.0.0.2:22", ("10.0.0.2", 22)),
        ("[::1]:2201", ("::1", 2201)),
        ("[fe80::1]", ("fe80::1", 2222)),
    ],
)
def test_parse_home(value: str, expected: tuple[str, int]) -> None:
    assert parse_home(value) == expected


@pytest.mark.parametrize("value", ["", ":22", "host:0", "host:99999", "host:ssh", "[::1"])
def test_parse_home_refuses(value: str) -> None:
    with pytest.raises(PairError):
        parse_home(value)


@pytest.mark.parametrize(
    ("device", "named"),
    [("k" * 65, "at most 64 characters"), ("a.b", "device"), ("", "device"), ("*", "device")],
)
def test_pair_refuses_a_device_name_no_pairing_can_have(
    tmp_path: Path, device: str, named: str
) -> None:
    with pytest.raises(PairError, match=named):
        pair(device, "127.0.0.1:2222", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_pair_cli(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(
        app,
        [
            "pair",
            "--device",
            "board",
            "--home",
            "h:2222",
            "--out",
            str(tmp_path),
            "--json",
            "--listen",
            "0.0.0.0",
        ],
    )
    assert ok.exit_code == 0, ok.output
    written = json.loads(ok.output)
    assert load_bridge_half(written["home_half"]).endpoint.host == "0.0.0.0"
    check = runner.invoke(app, ["check", written["edge_half"], written["home_half"]])
    assert check.exit_code == 0, check.output
    bad = runner.invoke(app, ["pair", "--device", "Board!", "--home", "h", "--out", str(tmp_path)])
    assert bad.exit_code == 2
    assert "device must be one lowercase token" in bad.output


# --- bridge serve: the OpenSSH forced-command path ----------------------------------


@contextlib.asynccontextmanager
async def _serve(paired: Paired, home_nats: str):  # type: ignore[no-untyped-def]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bridge.cli",
        "serve",
        "--device",
        "board",
        "--half",
        str(paired.result.home_half),
        "--nats",
        home_nats,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 10)


async def test_serve_carries_frames_on_stdio(
    paired: Paired, home_nats: str, edge_nats: str
) -> None:
    home_nc, edge_nc = await nats.connect(home_nats), await nats.connect(edge_nats)
    core = BridgeCore(paired.edge, edge_nc, heartbeat_s=0.5)
    await core.start()
    seen = Collector()
    await home_nc.subscribe("events.sensation.>", cb=seen.cb)
    await home_nc.flush()
    try:
        async with _serve(paired, home_nats) as proc:
            assert proc.stdout is not None and proc.stdin is not None
            link = asyncio.create_task(core.run_link(proc.stdout, proc.stdin, peer="serve"))
            await wait_until(lambda: core.state == "up", what="link up over stdio")
            await edge_nc.publish("events.sensation.board.turn", turn(1))
            await wait_until(lambda: seen.msgs, what="the turn at home")
            assert seen.events()[0].hops == ("bridge:board@edge", "bridge:board@home")
            proc.stdin.close()
            assert await asyncio.wait_for(proc.wait(), 10) == 0
            with pytest.raises(LinkError):
                await asyncio.wait_for(link, 10)
    finally:
        await core.close()
        await home_nc.close()
        await edge_nc.close()


async def test_serve_refuses_a_mismatched_half_at_hello(
    paired: Paired, home_nats: str, edge_nats: str
) -> None:
    edge_nc = await nats.connect(edge_nats)
    wider = dataclasses.replace(
        paired.edge,
        imports=(*paired.edge.imports, SubjectDecl("events.workspace.main.out.delegate", 1)),
    )
    core = BridgeCore(wider, edge_nc)
    try:
        async with _serve(paired, home_nats) as proc:
            assert proc.stdout is not None and proc.stdin is not None
            with pytest.raises(HelloRefused, match="does not pair") as info:
                await asyncio.wait_for(core.run_link(proc.stdout, proc.stdin), 10)
            assert any("B012" in f and "delegate" in f for f in info.value.findings)
            assert await asyncio.wait_for(proc.wait(), 10) == 1
            assert proc.stderr is not None
            assert b"does not pair" in await proc.stderr.read()
    finally:
        await edge_nc.close()
