"""Pairing shared by every member of a clustered home: the replicated ``HOME_PAIRING`` bucket.

A board paired on one member reaches the home through any other, with nothing copied
by hand (docs/architecture.md "Growing past one machine"). Each member's
``DATA_DIR/bridge`` stays what its endpoint and its bus users read; this component
keeps those files and the replicated key-value bucket :data:`BUCKET` the same:

- ``device.D``: device D's pairing, its home half, its edge half and the board's key
  pair (the private key sealed);
- ``host-key``: the endpoint's host key, sealed. The first member to pair a device
  writes it and every other member takes it, so a board that pinned it is served by all;
- ``revoked.F``: one revoked key (a revocation is never taken back).

*Sealed* is encrypted with a key derived from the routes' password
(``$TETHER_CLUSTER_SECRET``, which every member has): only the home's admin user may
read the bucket, and the routes between members are not encrypted.

Every :data:`SYNC_S` the member compares each key of the bucket with its files and
with what it last saw of both. Where the bucket moved, the bucket is applied to the
files (a device paired, unpaired or revoked on another member). Where only the files
moved, they are written to the bucket (a device paired or unpaired here, by the verbs
or by ``bridge pair --out``), by compare-and-set at the revision last seen: a write
racing another member's loses, and the other's is applied on the next look. At start
the bucket wins over the files, so a member that comes back takes what changed while
it was away; only its host key stays its own when it differs (``home status`` says so).

An entry that cannot be used (not JSON, sealed under another password, a half that
does not load or names another device) is refused by name, counted and logged, and
never applied: the member's own files stay as they were.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import asyncssh
from cryptography.fernet import Fernet, InvalidToken
from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError
from nats.js.client import JetStreamContext
from nats.js.errors import KeyWrongLastSequenceError, NoKeysError
from nats.js.errors import NotFoundError as JsNotFound
from nats.js.kv import KeyValue

from bridge.pair import HOST_KEY_NAME, PairingFiles, device_name_problem
from home.bridge.devices import pairing_files, remove_files
from home.bridge.revoked import RevokedKey, RevokedKeys
from home.substrate.component import ComponentInfo, Health, open_bucket, until_answered
from home.substrate.errors import ComponentError, PairingEntryError
from shared.errors import SchemaError
from shared.files import write_atomic
from shared.lifecycle import Service, cancel_and_wait
from shared.schema import load_bridge_half

BUCKET = "HOME_PAIRING"
SYNC_S = 1.0
HOST_KEY = "host-key"
DEVICE_PREFIX = "device."
REVOKED_PREFIX = "revoked."
# The sealing key is stretched from the routes' password once per process (scrypt).
_SALT = b"tether HOME_PAIRING v1"
log = logging.getLogger("tether.home.bridge.replica")


class Seal:
    """Encrypts the private keys the bucket carries with the routes' password."""

    def __init__(self, secret: str) -> None:
        stretched = hashlib.scrypt(secret.encode(), salt=_SALT, n=2**14, r=8, p=1, dklen=32)
        self._fernet = Fernet(base64.urlsafe_b64encode(stretched))

    def seal(self, text: str) -> str:
        """``text`` encrypted and authenticated."""
        return self._fernet.encrypt(text.encode()).decode("ascii")

    def open(self, token: object, key: str) -> str:
        """The text sealed in ``token``; PairingEntryError when this password cannot open it."""
        try:
            if not isinstance(token, str):
                raise InvalidToken
            return self._fernet.decrypt(token.encode("ascii")).decode()
        except (InvalidToken, UnicodeError, ValueError):
            raise PairingEntryError(
                f"{BUCKET}/{key}: sealed under another TETHER_CLUSTER_SECRET (or damaged)"
            ) from None


@dataclass(frozen=True)
class Pairing:
    """One device's files as text (None: that file is absent here)."""

    home_half: str
    edge_half: str | None = None
    client_key: str | None = None
    client_pub: str | None = None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _write(path: Path, text: str, *, private: bool = False) -> None:
    """Write ``text`` to ``path`` whole (a reader sees the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if private:
        os.chmod(path.parent, 0o700)
    write_atomic(path, text, private=private)


class PairingFolder:
    """The pairing files of one data directory's ``bridge/`` folder, read and written whole."""

    def __init__(self, bridge_dir: Path) -> None:
        self.dir = bridge_dir
        self.revoked = RevokedKeys(bridge_dir)

    def devices(self) -> list[str]:
        """Every device with a home half here."""
        return sorted(p.name.removesuffix(".home.yaml") for p in self.dir.glob("*.home.yaml"))

    def read(self, device: str) -> Pairing | None:
        """``device``'s files (None: no home half, so not paired here)."""
        files = PairingFiles.of(self.dir, device)
        home = _read(files.home_half)
        if home is None:
            return None
        key = files.client_key
        return Pairing(home, _read(files.edge_half), _read(key), _read(_pub(key)))

    def write(self, device: str, pairing: Pairing) -> None:
        """Make ``device``'s files these; the home half last, as the endpoint serves on it."""
        files = PairingFiles.of(self.dir, device)
        for path, text in (
            (files.edge_half, pairing.edge_half),
            (files.client_key, pairing.client_key),
            (_pub(files.client_key), pairing.client_pub),
        ):
            if text is None:
                path.unlink(missing_ok=True)
            else:
                _write(path, text, private=path == files.client_key)
        _write(files.home_half, pairing.home_half)

    def remove(self, device: str) -> None:
        """Forget ``device`` here (its outbox stays: it may be paired again)."""
        remove_files(pairing_files(self.dir, device, None))

    @property
    def host_key_path(self) -> Path:
        """The endpoint's private host key."""
        return self.dir / "secrets" / HOST_KEY_NAME

    def host_key(self) -> str | None:
        """The endpoint's private host key, as text."""
        return _read(self.host_key_path)

    def write_host_key(self, text: str) -> None:
        """Make the endpoint's host key this one (its public half beside it)."""
        try:
            public = asyncssh.import_private_key(text).export_public_key("openssh").decode()
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise PairingEntryError(f"{BUCKET}/{HOST_KEY}: not a private key: {exc}") from None
        _write(self.host_key_path, text, private=True)
        _write(_pub(self.host_key_path), public)

    def check_half(self, device: str, text: str, key: str) -> None:
        """PairingEntryError unless ``text`` loads as ``device``'s home half."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{device}.", suffix=".incoming")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            half = load_bridge_half(Path(tmp))
        except SchemaError as exc:
            raise PairingEntryError(f"{BUCKET}/{key}: its home half does not load: {exc}") from None
        finally:
            Path(tmp).unlink(missing_ok=True)
        if half.device != device or half.side != "home":
            raise PairingEntryError(
                f"{BUCKET}/{key}: holds the {half.side} half of {half.device!r}, "
                f"not the home half of {device!r}"
            )


def _pub(key: Path) -> Path:
    return key.with_name(key.name + ".pub")


def revoked_key(record: RevokedKey) -> str:
    """The bucket key of one revoked key (a fingerprint has characters a key may not)."""
    return REVOKED_PREFIX + hashlib.sha256(record.fingerprint.encode()).hexdigest()[:40]


@dataclass
class Seen:
    """A bucket key as this member last reconciled it: the bucket's revision (None: not
    in the bucket) and the value its files then held."""

    revision: int | None
    value: Any


@dataclass
class Refusals:
    """Bucket entries refused: how many, and the last one's reason."""

    count: int = 0
    last: str = ""
    # (key, revision) already refused: an entry is refused once, not every look.
    seen: set[tuple[str, int]] = field(default_factory=set)


Changed = Callable[[], Awaitable[None]]


class BusConnection(Protocol):
    """Whatever holds the member's admin connection (the substrate, once started)."""

    @property
    def nc(self) -> NatsClient | None:
        """The open connection, or None while there is none."""


def _order(key: str) -> tuple[int, str]:
    """The host key first (a half is served with it), then revocations, then devices."""
    return (0 if key == HOST_KEY else 1 if key.startswith(REVOKED_PREFIX) else 2, key)


class PairingReplica(Service):
    """This member's pairing files kept the same as the replicated bucket; a component."""

    name = "pairing"

    def __init__(
        self,
        bridge_dir: Path,
        bus: BusConnection,
        secret: str,
        on_change: Changed,
        *,
        interval_s: float = SYNC_S,
    ) -> None:
        self.folder = PairingFolder(bridge_dir)
        self._bus = bus
        self._seal = Seal(secret)
        self._on_change = on_change
        self._interval_s = interval_s
        self._kv: KeyValue | None = None
        self._seen: dict[str, Seen] = {}
        # The bucket's stream sequence at the last full read, and what that read found.
        self._read_at = -1
        self._entries: dict[str, tuple[int, bytes]] = {}
        self.refusals = Refusals()
        self.host_key_differs = False
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Open the bucket, make the files and the bucket the same once, then keep them so."""
        self._kv = await until_answered(
            self._bucket, within_s=60.0, interval_s=self._interval_s, asking=f"kv {BUCKET}"
        )
        await until_answered(
            self.sync, within_s=60.0, interval_s=self._interval_s, asking=f"kv {BUCKET}"
        )
        self._task = asyncio.create_task(self._run(), name="pairing")

    async def close(self) -> None:
        """Stop keeping the files and the bucket the same; idempotent."""
        task, self._task = self._task, None
        await cancel_and_wait(task, reraise=False)

    async def health(self) -> Health:
        """Healthy while the files follow the bucket; the detail names what differs."""
        if self._task is None or self._task.done():
            return Health(False, "the pairing replica stopped")
        devices = sum(1 for key in self._seen if key.startswith(DEVICE_PREFIX))
        said = [f"{devices} device(s) shared"]
        if self.host_key_differs:
            said.append(
                "this member's host key differs from the home's: boards paired on other "
                "members cannot verify it"
            )
        if self.refusals.count:
            said.append(f"{self.refusals.count} entry(ies) refused, last: {self.refusals.last}")
        if self.last_error:
            said.append(self.last_error)
        return Health(self.last_error is None, "; ".join(said))

    def info(self) -> ComponentInfo:
        """The bucket."""
        return ComponentInfo(f"kv {BUCKET}", None)

    async def _bucket(self) -> KeyValue:
        nc = self._bus.nc
        if nc is None:
            raise TimeoutError("the substrate is not connected yet")
        return await open_bucket(nc.jetstream(), BUCKET)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.sync()
                self.last_error = None
            except (NatsError, TimeoutError, OSError, SchemaError, ComponentError) as exc:
                # A stream leader lost with a member is elected again within seconds; the
                # bus's users may not reload while the server is away.
                self.last_error = f"pairing: {exc!r}"
                log.warning("%s", self.last_error)

    # --- one look: the bucket, the files, and what this member last saw of both -----

    async def sync(self) -> None:
        """Apply what moved in the bucket to the files, and what moved in the files to the
        bucket; tell the endpoint when the files changed."""
        assert self._kv is not None, "sync runs once the bucket is open"
        entries = await self._read_bucket(self._kv)
        local = await asyncio.to_thread(self._read_files)
        changed = False
        for key in sorted(set(entries) | set(local) | set(self._seen), key=_order):
            changed |= await self._reconcile(self._kv, key, entries.get(key), local.get(key))
        if changed:
            await self._on_change()

    async def _read_bucket(self, kv: KeyValue) -> dict[str, tuple[int, bytes]]:
        """Every live key's revision and value, read again only when the bucket moved."""
        js = self._js()
        state = (await js.stream_info(f"KV_{BUCKET}")).state
        if state.last_seq == self._read_at:
            return self._entries
        try:
            keys = await kv.keys()
        except NoKeysError:
            keys = []
        entries = {}
        for key in keys:
            try:
                entry = await kv.get(key)
            except (JsNotFound, NoKeysError):
                continue
            if entry.value is not None and entry.revision is not None:
                entries[key] = (entry.revision, entry.value)
        self._read_at, self._entries = state.last_seq, entries
        return entries

    def _js(self) -> JetStreamContext:
        nc = self._bus.nc
        if nc is None:
            raise TimeoutError("the substrate is not connected")
        return nc.jetstream()

    def _read_files(self) -> dict[str, Any]:
        """What this member's files hold, by bucket key."""
        local: dict[str, Any] = {}
        host_key = self.folder.host_key()
        if host_key is not None:
            local[HOST_KEY] = host_key
        for record in self.folder.revoked.load():
            local[revoked_key(record)] = record
        for device in self.folder.devices():
            pairing = self.folder.read(device)
            if pairing is not None:
                local[DEVICE_PREFIX + device] = pairing
        return local

    async def _reconcile(
        self, kv: KeyValue, key: str, entry: tuple[int, bytes] | None, local: Any
    ) -> bool:
        """One key: the bucket's move wins; else the files' move is written. Whether the
        files changed."""
        seen = self._seen.get(key)
        revision = None if entry is None else entry[0]
        if seen is not None and seen.revision == revision:
            if local != seen.value:
                await self._write_bucket(kv, key, local, seen)
            return False
        if entry is None:
            self._seen.pop(key, None)
            if seen is None:  # only here: a device paired on this member
                await self._write_bucket(kv, key, local, None)
                return False
            return await asyncio.to_thread(self._removed, key, local)
        try:
            value = self._decode(key, entry[1])
            held = await asyncio.to_thread(self._apply, key, value, local)
        except PairingEntryError as exc:
            self._refuse(key, entry[0], str(exc))
            held = local
        self._seen[key] = Seen(entry[0], held)
        return bool(held != local)

    async def _write_bucket(self, kv: KeyValue, key: str, local: Any, seen: Seen | None) -> None:
        """Write this member's value of ``key`` at the revision last seen (a device gone
        here is deleted); a racing write by another member wins, and is applied next."""
        try:
            if local is None:
                if key.startswith(DEVICE_PREFIX) and seen is not None and seen.revision:
                    await kv.delete(key, last=seen.revision)
                self._seen.pop(key, None)
                return
            if key == HOST_KEY and seen is not None and seen.revision:
                # The home's host key is the first one written; this member's own stays here.
                self.host_key_differs = True
                self._seen[key] = Seen(seen.revision, local)
                return
            data = self.encode(key, local)
            if seen is not None and seen.revision:
                revision = await kv.update(key, data, last=seen.revision)
            else:
                revision = await kv.create(key, data)
        except KeyWrongLastSequenceError:
            log.info("pairing: %s was written by another member meanwhile; taking theirs", key)
            return
        self._seen[key] = Seen(revision, local)
        log.info("pairing: wrote %s/%s", BUCKET, key)

    # --- entries, both ways ---------------------------------------------------------

    def encode(self, key: str, value: Any) -> bytes:
        """The entry this member writes for ``key`` holding ``value`` (keys sealed)."""
        if key == HOST_KEY:
            body: dict[str, Any] = {"key": self._seal.seal(value)}
        elif isinstance(value, RevokedKey):
            body = value.to_dict()
        else:
            body = {
                "home_half": value.home_half,
                "edge_half": value.edge_half,
                "client_key": None
                if value.client_key is None
                else self._seal.seal(value.client_key),
                "client_pub": value.client_pub,
            }
        return json.dumps(body).encode()

    def _decode(self, key: str, raw: bytes) -> Any:
        """The value an entry carries; PairingEntryError naming the key and what is wrong."""
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise PairingEntryError(f"{BUCKET}/{key}: not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise PairingEntryError(f"{BUCKET}/{key}: not a JSON object")
        if key == HOST_KEY:
            return self._seal.open(body.get("key"), key)
        if key.startswith(REVOKED_PREFIX):
            try:
                return RevokedKey.from_dict(body, f"{BUCKET}/{key}")
            except SchemaError as exc:
                raise PairingEntryError(str(exc)) from None
        if key.startswith(DEVICE_PREFIX):
            return self._pairing(key, body)
        raise PairingEntryError(f"{BUCKET}/{key}: not a key this home writes")

    def _pairing(self, key: str, body: dict[str, Any]) -> Pairing:
        texts: dict[str, str | None] = {}
        for name in ("home_half", "edge_half", "client_key", "client_pub"):
            value = body.get(name)
            if value is not None and not isinstance(value, str):
                raise PairingEntryError(f"{BUCKET}/{key}: {name!r} must be a string")
            try:
                if value is not None:
                    value.encode()
            except UnicodeEncodeError:
                raise PairingEntryError(f"{BUCKET}/{key}: {name!r} is not UTF-8 text") from None
            texts[name] = value
        home, sealed = texts["home_half"], texts["client_key"]
        if home is None:
            raise PairingEntryError(f"{BUCKET}/{key}: 'home_half' is missing")
        client_key = None if sealed is None else self._seal.open(sealed, key)
        return Pairing(home, texts["edge_half"], client_key, texts["client_pub"])

    def _apply(self, key: str, value: Any, local: Any) -> Any:
        """Make the files hold ``value``; what they hold now (PairingEntryError: they stay). A
        host key of this member's own stays (boards paired here pinned it)."""
        if key == HOST_KEY:
            self.host_key_differs = local is not None and local != value
        if value == local:
            return local
        if key == HOST_KEY:
            if local is None:
                self.folder.write_host_key(value)
                return value
            return local
        if isinstance(value, RevokedKey):
            self.folder.revoked.add(value)
            log.warning(
                "pairing: key %s of %s revoked on another member", value.fingerprint, value.device
            )
            return value
        device = key.removeprefix(DEVICE_PREFIX)
        self._check_device(device, key)
        self.folder.check_half(device, value.home_half, key)
        self.folder.write(device, value)
        log.info("pairing: %s paired on another member; serving it here too", device)
        return value

    def _removed(self, key: str, local: Any) -> bool:
        """The bucket deleted ``key``: a device unpaired on another member goes here too."""
        if not key.startswith(DEVICE_PREFIX) or local is None:
            return False
        device = key.removeprefix(DEVICE_PREFIX)
        self.folder.remove(device)
        log.warning("pairing: %s unpaired on another member; not serving it here", device)
        return True

    @staticmethod
    def _check_device(device: str, key: str) -> None:
        problem = device_name_problem(device)
        if problem is not None:
            raise PairingEntryError(f"{BUCKET}/{key}: {problem}")

    def _refuse(self, key: str, revision: int, reason: str) -> None:
        if (key, revision) in self.refusals.seen:
            return
        self.refusals.seen.add((key, revision))
        self.refusals.count += 1
        self.refusals.last = reason
        log.warning("pairing: refused %s", reason)
