"""The home bridge endpoint, supervised by ``home up`` like any other component.

It serves every device paired into the data directory: ``bridge pair --device D
--out DATA_DIR/bridge`` writes ``D.home.yaml`` there and the endpoint's host key
into ``DATA_DIR/bridge/secrets/``, and each device's durable outbox lives in
``DATA_DIR/bridge/outbox/``. With no device paired it listens nowhere.

A device paired while home runs is served without a restart and without
touching the links already up: every health check looks for new halves, and the
control verb ``bridge.pair`` (``edge run``/``edge say``/``edge tui --data-dir``)
makes the keys and both halves on this machine (once) and serves the device at once.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bridge.check import Severity, check_pair
from bridge.errors import BridgeError, PairError
from bridge.node.home import HomeBridgeEndpoint
from bridge.node.outbox import OUTBOX_DIR, store_path
from bridge.pair import HOST_KEY_NAME, PairingFiles, device_name_problem, pair
from home.bridge.devices import (
    KEY_REVOKED,
    NOT_SERVED,
    DeviceRemoved,
    DevicesView,
    PairedDevice,
    pairing_files,
    remove_files,
)
from home.bridge.revoked import RevokedKey, RevokedKeys
from home.substrate.bus_auth import BusAuthority, bridge_user_name
from home.substrate.component import BusAddress, ComponentInfo, Health
from home.substrate.errors import ComponentError
from shared import control
from shared.bus_credentials import ADMIN_USER
from shared.control import ControlRequest, PairResult
from shared.errors import ControlError, SchemaError
from shared.lifecycle import Service
from shared.proc import free_port
from shared.schema import BridgeHalf, load_bridge_half
from shared.schema.bridge_half import DEFAULT_PORT, ssh_fingerprint

BRIDGE_DIR = "bridge"
# A paired device's name names its files; well under any file-name limit.
log = logging.getLogger("tether.home.bridge")


def key_fingerprint(half: BridgeHalf) -> str:
    """The fingerprint of the key ``half`` authorizes ("" for none)."""
    key = half.endpoint.client_key
    return ssh_fingerprint(key) if key else ""


def paired_home_halves(data_dir: Path) -> list[Path]:
    """The home halves ``bridge pair`` wrote into ``DATA_DIR/bridge``, sorted by name."""
    return sorted((data_dir / BRIDGE_DIR).glob("*.home.yaml"))


class PairedHalves:
    """The paired home halves of a data directory, each parsed again only when its file changed.

    Every health check and every pairing looks at all of them; parsing a half costs
    about a millisecond, so with a hundred boards a full parse each second would hold
    home's event loop (the router's) for a tenth of it (docs/architecture.md "Home").
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._parsed: dict[Path, tuple[tuple[int, int, int], BridgeHalf]] = {}
        self.revoked = RevokedKeys(data_dir / BRIDGE_DIR)
        # Halves left out at the last load because they authorize a revoked key.
        self.refused: list[BridgeHalf] = []

    def load(self) -> tuple[list[BridgeHalf], list[tuple[Path, SchemaError]]]:
        """Every half that loads, and each one that does not with why, in file order.

        A half that authorizes a revoked key is in neither list but in :attr:`refused`:
        nothing serves it and no bus user is made for it. A revocation record that
        cannot be read leaves every half out, the record named as the unusable file.
        """
        try:
            revoked = self.revoked.fingerprints()
        except SchemaError as exc:
            return [], [(self.revoked.path, exc)]
        halves: list[BridgeHalf] = []
        unusable: list[tuple[Path, SchemaError]] = []
        refused: list[BridgeHalf] = []
        paths = paired_home_halves(self.data_dir)
        for path in paths:
            try:
                half = self._half(path)
            except SchemaError as exc:
                unusable.append((path, exc))
                continue
            (refused if key_fingerprint(half) in revoked else halves).append(half)
        for gone in set(self._parsed) - set(paths):
            del self._parsed[gone]
        if refused and {h.device for h in refused} != {h.device for h in self.refused}:
            for half in refused:
                log.warning("bridge: not serving %s: it authorizes a revoked key", half.file)
        self.refused = refused
        return halves, unusable

    def _half(self, path: Path) -> BridgeHalf:
        try:
            info = path.stat()
        except OSError:
            return load_bridge_half(path)  # gone meanwhile: the loader names the file
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        cached = self._parsed.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        half = load_bridge_half(path)
        self._parsed[path] = (stamp, half)
        return half


class HomeBridgeComponent(Service):
    """The embedded asyncssh endpoint for every paired device (component name ``bridge``)."""

    name = "bridge"

    def __init__(
        self,
        data_dir: Path,
        bus: BusAddress,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        authority: BusAuthority | None = None,
    ) -> None:
        self._dir = data_dir / BRIDGE_DIR
        self._bus = bus
        # The bus's users; None: a bus without authorization (no credentials anywhere).
        self._authority = authority
        self._host = host
        # Port 0 is fixed to a free port now, so halves paired later name the real one.
        self._port = free_port(host) if port == 0 else port
        self._endpoint: HomeBridgeEndpoint | None = None
        self._lock = asyncio.Lock()
        self._paired = PairedHalves(data_dir)

    def _halves(self) -> list[BridgeHalf]:
        halves, unusable = self._paired.load()
        if unusable:
            path, exc = unusable[0]
            raise ComponentError(f"bridge: paired half {path} is unusable: {exc}") from exc
        return halves

    async def start(self) -> None:
        """Listen for every paired device (nothing to do while none is paired)."""
        async with self._lock:
            await self._serve(self._halves())

    async def _serve(self, halves: list[BridgeHalf]) -> list[str]:
        """Serve every half not served yet (a re-paired device anew) and no device whose
        half is gone; the devices added."""
        if self._endpoint is None:
            if not halves:
                return []
            self._endpoint = await self._open(halves)
            return sorted(self._endpoint.halves)
        for device in sorted(set(self._endpoint.halves) - {half.device for half in halves}):
            closed = await self._endpoint.remove(device)
            log.warning(
                "bridge: %s is not paired here any more (%d link(s) closed)", device, closed
            )
        added = []
        for half in halves:
            served = self._endpoint.halves.get(half.device)
            if served is not None and served.endpoint.client_key == half.endpoint.client_key:
                continue
            try:
                if served is not None:
                    await self._endpoint.remove(half.device)
                await self._endpoint.add(half)
            except BridgeError as exc:
                raise ComponentError(f"bridge: cannot serve {half.file}: {exc}") from exc
            added.append(half.device)
        return added

    async def _open(self, halves: list[BridgeHalf]) -> HomeBridgeEndpoint:
        host_key = self._dir / "secrets" / HOST_KEY_NAME
        if not host_key.is_file():
            raise ComponentError(
                f"bridge: the endpoint's host key {host_key} is missing; pair the device again "
                f"with `bridge pair --device NAME --home HOST:PORT --out {self._dir}`"
            )
        try:
            endpoint = HomeBridgeEndpoint(
                halves,
                host_key=host_key,
                nats_url=self._endpoint_url(),
                port=self._port,
                device_url=None if self._authority is None else self._device_url,
                outbox_dir=self._dir / OUTBOX_DIR,
            )
            await endpoint.start()
        except (BridgeError, OSError) as exc:
            raise ComponentError(f"bridge: the endpoint did not start: {exc}") from exc
        return endpoint

    def _endpoint_url(self) -> str:
        """The endpoint's own bus URL: it reads the event log for events left in doubt by
        a crash, which a device's user may not (docs/architecture.md "Bridge: the durable
        outbox")."""
        if self._authority is None:
            return self._bus.url
        return self._authority.url(ADMIN_USER, self._bus.url)

    async def _device_url(self, device: str) -> str:
        """``device``'s bus URL as its bridge half's own user (docs/architecture.md
        "Security")."""
        assert self._authority is not None  # only handed to the endpoint with an authority
        # A device paired a moment ago needs its user before its half connects.
        await self._authority.refresh()
        return self._authority.url(bridge_user_name(device), self._bus.url)

    async def refresh(self) -> list[str]:
        """Serve devices paired into the data directory since the last look; the ones added.

        `bridge pair --out DATA_DIR/bridge` while home runs needs no restart: every
        health check looks, and the ``bridge.pair`` verb looks at once.
        """
        async with self._lock:
            return await self._serve(self._halves())

    async def files_changed(self) -> None:
        """The pairing files changed under the endpoint (a device paired, unpaired or revoked
        on another member of the home, :mod:`home.bridge.replica`): serve what they say now,
        and give the bus the same users. A half that cannot be served is named by health."""
        try:
            await self.refresh()
        except ComponentError as exc:
            log.warning("%s", exc)
        if self._authority is not None:
            await self._authority.refresh()

    async def health(self) -> Health:
        """Healthy while listening (or while nothing is paired); the detail names each link."""
        try:
            await self.refresh()
        except ComponentError as exc:
            return Health(False, str(exc))
        if self._endpoint is None:
            return Health(True, "no device paired")
        report = self._endpoint.health()
        links = ", ".join(
            f"{device} {state.get('state', '?')}"
            + (f" ({state['store_fault']})" if state.get("store_fault") else "")
            for device, state in sorted(report["devices"].items())
        )
        return Health(bool(report["ok"]), links or "no device paired")

    async def close(self) -> None:
        """Stop listening and end every link; idempotent."""
        if self._endpoint is not None:
            await self._endpoint.close()
            self._endpoint = None

    def info(self) -> ComponentInfo:
        """``ssh://host:port`` of the endpoint."""
        if self._endpoint is None:
            return ComponentInfo(f"ssh://{self._host}:{self.port} (no device paired)", None)
        addresses = self._endpoint.addresses
        return ComponentInfo(", ".join(f"ssh://{host}:{port}" for host, port in addresses), None)

    @property
    def port(self) -> int:
        """The port boards connect to: the configured one, else the halves', else 2222."""
        if self._endpoint is not None:
            return self._endpoint.port
        if self._port:
            return self._port
        halves = self._halves()
        return halves[0].endpoint.port if halves else DEFAULT_PORT

    def _stale_pairing(self, device: str) -> str:
        """Why ``device``'s pairing here cannot link any more ("" when it can).

        A pairing made by an older release may break a rule added since (B023: a home
        half exporting memory reports); the link's hello would refuse it forever, so
        the verb makes it anew, as a person would with `bridge pair --force`.
        """
        files = PairingFiles.of(self._dir, device)
        edge, home = files.edge_half, files.home_half
        if not edge.is_file() and not home.is_file():
            return ""  # never paired: nothing stale
        if not (edge.is_file() and home.is_file()):
            return "one half is missing"
        try:
            findings = check_pair(load_bridge_half(edge), load_bridge_half(home))
        except SchemaError as exc:
            return str(exc)
        errors = [f for f in findings if f.severity is Severity.ERROR]
        return "; ".join(f"{f.rule} {f.name}" for f in errors)

    async def pair_device(self, request: ControlRequest) -> dict[str, Any]:
        """Control verb ``bridge.pair``: pair ``device`` on this machine (once) and serve it."""
        device = _device_argument(request)
        async with self._lock:
            files = PairingFiles.of(self._dir, str(device))
            edge_half, key = files.edge_half, files.client_key
            stale = await asyncio.to_thread(self._stale_pairing, str(device))
            if stale:
                log.warning("bridge: pairing %s again: %s", device, stale)
            if stale or not (edge_half.is_file() and key.is_file()):
                where = f"{self._host}:{self.port}"
                try:
                    await asyncio.to_thread(
                        pair, str(device), where, self._dir, listen_host=self._host, force=True
                    )
                except PairError as exc:
                    raise ControlError(control.REFUSED, str(exc)) from None
            try:
                await self._serve(self._halves())
            except ComponentError as exc:
                raise ControlError(control.REFUSED, str(exc)) from None
        endpoint = f"ssh://{self._host}:{self.port}"
        return PairResult(str(device), str(edge_half), str(key.parent), endpoint).to_dict()

    # --- home devices: list, unpair, revoke (docs/architecture.md "Security") ---------

    async def list_devices(self, request: ControlRequest) -> dict[str, Any]:
        """Control verb ``bridge.devices``: every paired device and its link, every revoked key."""
        async with self._lock:
            halves, _ = self._paired.load()
            try:
                revoked = self._paired.revoked.load()
            except SchemaError as exc:
                raise ControlError(control.REFUSED, str(exc)) from None
            links = self._endpoint.health()["devices"] if self._endpoint is not None else {}
            rows = [
                PairedDevice(
                    h.device, key_fingerprint(h), links.get(h.device, {}).get("state", NOT_SERVED)
                )
                for h in halves
            ]
            rows += [
                PairedDevice(h.device, key_fingerprint(h), KEY_REVOKED)
                for h in self._paired.refused
            ]
        rows.sort(key=lambda row: row.device)
        return DevicesView(tuple(rows), revoked).to_dict()

    async def unpair_device(self, request: ControlRequest) -> dict[str, Any]:
        """Control verb ``bridge.unpair``: forget ``device`` (its halves, key and outbox)."""
        return await self._remove_device(request, revoke=False)

    async def revoke_device(self, request: ControlRequest) -> dict[str, Any]:
        """Control verb ``bridge.revoke``: refuse ``device``'s key for good, and record it."""
        return await self._remove_device(request, revoke=True)

    async def _remove_device(self, request: ControlRequest, *, revoke: bool) -> dict[str, Any]:
        device = _device_argument(request)
        async with self._lock:
            half = self._paired_half(device)
            fingerprint = key_fingerprint(half)
            if revoke:
                record = RevokedKey(
                    device,
                    fingerprint,
                    half.endpoint.client_key or "",
                    datetime.now(UTC).isoformat(),
                )
                try:
                    # First, so that a revocation cut short still refuses the key.
                    if fingerprint not in self._paired.revoked.fingerprints():
                        await asyncio.to_thread(self._paired.revoked.add, record)
                except (OSError, SchemaError) as exc:
                    raise ControlError(
                        control.REFUSED, f"cannot record the revocation: {exc}"
                    ) from None
            closed = 0
            if self._endpoint is not None and device in self._endpoint.halves:
                closed = await self._endpoint.remove(device)
            # Revoked, the device may be paired again under its name: what waits for it stays.
            outbox = None if revoke else store_path(self._dir / OUTBOX_DIR, half)
            try:
                removed = await asyncio.to_thread(
                    remove_files, pairing_files(self._dir, device, outbox)
                )
            except OSError as exc:
                raise ControlError(
                    control.REFUSED, f"cannot remove {device}'s pairing: {exc}"
                ) from None
            if self._authority is not None:
                await self._authority.refresh()
        log.warning(
            "bridge: %s %s (key %s)", "revoked" if revoke else "unpaired", device, fingerprint
        )
        return DeviceRemoved(device, fingerprint, revoke, closed, removed).to_dict()

    def _paired_half(self, device: str) -> BridgeHalf:
        """``device``'s home half here; ControlError ``not_found`` when it has none."""
        path = PairingFiles.of(self._dir, device).home_half
        if not path.is_file():
            raise ControlError(control.NOT_FOUND, f"no device {device!r} is paired here")
        try:
            return load_bridge_half(path)
        except SchemaError as exc:
            raise ControlError(
                control.REFUSED,
                f"{device}'s home half cannot be read, so neither can its key: {exc}",
            ) from None


def _device_argument(request: ControlRequest) -> str:
    """The request's ``device``, a name a pairing can have; ControlError ``bad_request`` if not."""
    device = str(request.text("device"))
    problem = device_name_problem(device)
    if problem is not None:
        raise ControlError(control.BAD_REQUEST, problem)
    return device
