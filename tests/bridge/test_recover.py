"""After a crash, home's events in doubt are read from its event log as the endpoint.

Under `home up`'s bus authorization each device's core runs as that device's bridge
user, which has no JetStream rights; the lookup of what the killed run delivered but
had not committed (bridge/node/recover.py) goes through the endpoint's own connection.
"""

from __future__ import annotations

import time
from pathlib import Path

import nats
from nats.js.api import StorageType, StreamConfig

from bridge.node.home import HomeBridgeEndpoint
from bridge.node.outbox import OutboxStore, store_path
from bridge.node.recover import delivered_since
from shared.event import Event
from shared.subjects import matches
from tests.bridge.servers import Paired, nats_server

TURN = "events.sensation.board.turn"
DEVICE_RIGHTS = '["events.>", "_INBOX.>"]'


def _auth_config(tmp_path: Path) -> Path:
    """JetStream, an admin user with every right, a device user with events only."""
    config = tmp_path / "nats.conf"
    config.write_text(
        f"""
jetstream {{ store_dir: "{tmp_path / "js"}" }}
authorization {{
  users = [
    {{ user: admin, password: adminpw }}
    {{ user: device, password: devicepw,
       permissions: {{ publish: {DEVICE_RIGHTS}, subscribe: {DEVICE_RIGHTS} }} }}
  ]
}}
"""
    )
    return config


async def test_the_endpoint_looks_up_events_in_doubt_that_the_device_user_may_not_read(
    paired: Paired, tmp_path: Path
) -> None:
    assert any(matches(p, TURN) for p in paired.home.import_patterns)
    with nats_server(_auth_config(tmp_path)) as url:
        admin_url = url.replace("nats://", "nats://admin:adminpw@")
        device_url = url.replace("nats://", "nats://device:devicepw@")
        # The killed run committed its receive state, then delivered one more event
        # (home's event log recorded it) before it died.
        outbox = tmp_path / "outbox"
        store = OutboxStore(store_path(outbox, paired.home))
        store.commit_inbound("peer-stream", 5, [], time.time())
        store.close()
        event = Event.new("sensation.turn", {"text": "in doubt"}, source="t", sequence_number=6)
        nc = await nats.connect(admin_url)
        try:
            js = nc.jetstream()
            await js.add_stream(
                StreamConfig(name="EVENTS", subjects=["events.>"], storage=StorageType.FILE)
            )
            await js.publish(TURN, event.to_json())

            # The device's own user learns nothing from the log: it may not ask.
            device_nc = await nats.connect(device_url)
            try:
                assert await delivered_since(device_nc, (TURN,), time.time() - 60) == {}
            finally:
                await device_nc.close()

            async def url_of(device: str) -> str:
                return device_url

            endpoint = HomeBridgeEndpoint(
                [paired.home],
                host_key=paired.result.host_key,
                nats_url=admin_url,
                port=0,
                device_url=url_of,
                outbox_dir=outbox,
            )
            await endpoint.start()
            try:
                core = endpoint.cores[paired.home.device]
                # The restarted core will not deliver the peer's resend of it again.
                assert core.session.dedupe.seen(event.event_id, time.time())
            finally:
                await endpoint.close()
        finally:
            await nc.close()
