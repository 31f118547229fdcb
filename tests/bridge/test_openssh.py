"""The OpenSSH path: a stock sshd with a forced command runs `bridge serve` for the board's key."""

from __future__ import annotations

import dataclasses
import getpass
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from bridge.node import EdgeBridgeNode
from bridge.transport import Backoff
from shared.proc import free_port, terminate_blocking, wait_for_port_blocking
from tests.bridge.servers import Collector, Paired, wait_until
from tests.bridge.test_link import turn

SSHD = Path("/usr/sbin/sshd")  # Debian package openssh-server (Makefile DEB_PACKAGES)


@pytest.fixture
def sshd(paired: Paired, home_nats: str, tmp_path: Path) -> Iterator[int]:
    """A real sshd on loopback whose only authorized key is the board's, with a forced command."""
    if not SSHD.exists():
        raise RuntimeError(f"{SSHD} is missing: install the Debian package openssh-server")
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    port = free_port()
    command = shlex.join(
        [
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
        ]
    )
    public = paired.edge.endpoint.client_key
    authorized = tmp_path / "authorized_keys"
    authorized.write_text(f'command="{command}",restrict {public}\n')
    config = tmp_path / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {paired.result.host_key}",
                f"PidFile {tmp_path / 'sshd.pid'}",
                f"AuthorizedKeysFile {authorized}",
                "PermitRootLogin forced-commands-only",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                # The edge asks for this subsystem; the forced command runs in its place.
                "Subsystem tether-bridge /bin/false",
            ]
        )
        + "\n"
    )
    log = (tmp_path / "sshd.log").open("wb")  # sshd -e logs here: read it when this fails
    proc = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=log
    )
    try:
        wait_for_port_blocking("127.0.0.1", port, timeout_s=10, exit_code=proc.poll)
        yield port
    finally:
        terminate_blocking(proc)
        log.close()


async def test_board_talks_to_stock_openssh_through_the_forced_command(
    paired: Paired, sshd: int, home_nats: str, edge_nats: str
) -> None:
    half = dataclasses.replace(
        paired.edge,
        endpoint=dataclasses.replace(paired.edge.endpoint, port=sshd, user=getpass.getuser()),
    )
    home_nc, edge_nc = await nats.connect(home_nats), await nats.connect(edge_nats)
    at_home, at_edge = Collector(), Collector()
    await home_nc.subscribe("events.sensation.>", cb=at_home.cb)
    await edge_nc.subscribe("events.workspace.>", cb=at_edge.cb)
    await home_nc.flush()
    await edge_nc.flush()
    node = EdgeBridgeNode(
        half,
        client_key=paired.result.client_key,
        nats_url=edge_nats,
        backoff=Backoff(base_s=0.1, cap_s=0.5),
        heartbeat_s=1.0,
    )
    await node.start()
    try:
        await wait_until(lambda: node.health()["ok"], timeout_s=20, what="link up via sshd")
        await edge_nc.publish("events.sensation.board.turn", turn(1))
        await wait_until(lambda: at_home.msgs, what="the turn at home")
        assert at_home.events()[0].hops == ("bridge:board@edge", "bridge:board@home")
        # bridge serve subscribed home's exports for as long as the connection lives.
        await home_nc.publish("events.workspace.main.out.speak.board", turn(2, "It is sunny."))
        await wait_until(lambda: at_edge.msgs, what="the speak event at the board")
        assert at_edge.events()[0].payload["text"] == "It is sunny."
    finally:
        await node.close()
        await home_nc.close()
        await edge_nc.close()
