"""The ``bridge.pair`` control verb on home's bridge component: pair once, serve at once.

A real nats-server and the real asyncssh endpoint on a free loopback port; the verb is
called as the control surface calls it.
"""

from __future__ import annotations

from pathlib import Path

from bridge.check import Severity, check_pair
from home.bridge.component import HomeBridgeComponent
from home.substrate.component import FixedBusAddress
from shared.control import ControlRequest
from shared.schema import load_bridge_half


async def _pair(component: HomeBridgeComponent, device: str) -> dict[str, str]:
    result: dict[str, str] = await component.pair_device(ControlRequest({"device": device}))
    return result


def _errors(data_dir: Path, device: str) -> list[str]:
    out = data_dir / "bridge"
    edge = load_bridge_half(out / f"{device}.edge.yaml")
    home = load_bridge_half(out / f"{device}.home.yaml")
    return [f.rule for f in check_pair(edge, home) if f.severity is Severity.ERROR]


async def test_pairing_serves_at_once_and_keeps_a_good_pairing(
    tmp_path: Path,
    nats_url: str,
) -> None:
    component = HomeBridgeComponent(tmp_path, FixedBusAddress(nats_url), port=0)
    await component.start()
    try:
        first = await _pair(component, "kitchen")
        key = Path(first["secrets"]) / "kitchen.edge.key"
        before = key.read_bytes()
        assert (await component.health()).detail.startswith("kitchen")
        await _pair(component, "hall")  # a second device, beside the first
        assert "kitchen" in (await component.health()).detail
        again = await _pair(component, "kitchen")
        assert again == first and key.read_bytes() == before  # nothing made anew
    finally:
        await component.close()


async def test_a_pairing_that_breaks_a_newer_rule_is_made_anew(
    tmp_path: Path,
    nats_url: str,
) -> None:
    component = HomeBridgeComponent(tmp_path, FixedBusAddress(nats_url), port=0)
    await component.start()
    try:
        await _pair(component, "kitchen")
    finally:
        await component.close()
    # As an older release paired it: home's half also exported the memory reports.
    home_half = tmp_path / "bridge" / "kitchen.home.yaml"
    text = home_half.read_text()
    home_half.write_text(
        text.replace("exports:\n", "exports:\n  - events.workspace.*.out.memorize.kitchen\n", 1)
    )
    assert "B023" in _errors(tmp_path, "kitchen")
    key = tmp_path / "bridge" / "secrets" / "kitchen.edge.key"
    old_key = key.read_bytes()

    # Served as it is, its link would be refused at every hello (check_pair runs there).
    component = HomeBridgeComponent(tmp_path, FixedBusAddress(nats_url), port=0)
    await component.start()
    try:
        await _pair(component, "kitchen")
        assert _errors(tmp_path, "kitchen") == []
        assert key.read_bytes() != old_key
        health = await component.health()
        assert health.ok and health.detail.startswith("kitchen")
    finally:
        await component.close()


async def test_a_half_gone_from_the_folder_is_served_no_more(
    tmp_path: Path,
    nats_url: str,
) -> None:
    """As a device unpaired on another member of the home leaves the folder: the next
    health check stops serving it and keeps serving the others."""
    component = HomeBridgeComponent(tmp_path, FixedBusAddress(nats_url), port=0)
    await component.start()
    try:
        await _pair(component, "kitchen")
        await _pair(component, "hall")
        (tmp_path / "bridge" / "kitchen.home.yaml").unlink()
        detail = (await component.health()).detail
        assert "hall" in detail and "kitchen" not in detail
        (tmp_path / "bridge" / "hall.home.yaml").unlink()
        await component.files_changed()
        assert (await component.health()).detail == "no device paired"
    finally:
        await component.close()
