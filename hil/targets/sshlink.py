"""One SSH connection to a board (paramiko): key auth only, the host key pinned, never added.

Everything hil does on a board goes through this: read-only commands, SFTP
reads, writes into the edge's spool, and a local forward to the board's NATS.
paramiko is blocking, so each call runs in a worker thread; SFTP calls are
serialised because one SFTP session is not safe to share between threads.

Exceptions (all :class:`SshError`, a :class:`~hil.runner.HilError`; the umbrella a
class also belongs to is in parentheses)::

    SshError               (LinkError) cannot connect, log in or run something
    ├── HostKeyMismatch    (RefusedError) the board presented another key than the pinned one
    └── HostKeyUnknown     (RefusedError) nothing is pinned for this host
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import stat
from dataclasses import dataclass
from pathlib import Path

import paramiko

from hil.runner import HilError
from hil.targets.address import SshAddress
from shared.errors import LinkError, RefusedError
from shared.lifecycle import Service, cancel_and_wait

CONNECT_TIMEOUT_S = 20.0
COMMAND_TIMEOUT_S = 60.0


class SshError(HilError, LinkError):
    """The board could not be reached, logged into, or made to run a command."""


class HostKeyMismatch(SshError, RefusedError):
    """The board's host key is not the pinned one (another board, or someone in between)."""

    def __init__(self, host: str, expected: str, presented: str) -> None:
        self.expected = expected
        self.presented = presented
        super().__init__(
            f"host key of {host} does not match the pinned key: expected {expected}, "
            f"presented {presented}; refusing to connect (if the board was reflashed, "
            "pin its new key after checking it on the board's console)"
        )


class HostKeyUnknown(SshError, RefusedError):
    """No key is pinned for the host; hil never adds one by itself."""

    def __init__(self, host: str, presented: str) -> None:
        self.presented = presented
        super().__init__(
            f"no host key is pinned for {host} (it presented {presented}); hil never trusts "
            "a key on first use: give --known-hosts FILE or --host-key 'TYPE BASE64'"
        )


def fingerprint(key: paramiko.PKey) -> str:
    """The key's SHA256 fingerprint as ``ssh-keygen -l`` prints it."""
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


def parse_public_key(line: str) -> paramiko.PKey:
    """``TYPE BASE64 [comment]`` (an OpenSSH public key line) as a key."""
    fields = line.split()
    if len(fields) < 2:
        raise SshError(f"expected a host key as 'TYPE BASE64', got {line!r:.80}")
    try:
        return paramiko.PKey.from_type_string(fields[0], base64.b64decode(fields[1]))
    except Exception as exc:
        raise SshError(f"cannot read the host key {line!r:.80}: {exc}") from exc


@dataclass(frozen=True)
class HostKeyPin:
    """Where the pinned host key comes from: a known_hosts file and/or one key line."""

    known_hosts: Path | None = None
    host_key: str | None = None


class _RefuseUnknown(paramiko.MissingHostKeyPolicy):
    """RejectPolicy that says which key the host presented."""

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        raise HostKeyUnknown(hostname, fingerprint(key))


@dataclass(frozen=True)
class Completed:
    """A command's exit status and output."""

    code: int
    stdout: str
    stderr: str


class SshLink(Service):
    """An open SSH + SFTP session to ``address``; use with ``async with``."""

    def __init__(
        self, address: SshAddress, key: Path | None, pin: HostKeyPin, *, use_agent: bool = False
    ) -> None:
        self.address = address
        self.key = key
        self.pin = pin
        # Off unless asked: hil logs in with the one key it was given, nothing else.
        self.use_agent = use_agent
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._sftp_lock = asyncio.Lock()

    async def start(self) -> None:
        """Connect over SSH."""
        await asyncio.to_thread(self._connect)

    async def close(self) -> None:
        """Close the SSH connection."""
        await asyncio.to_thread(self._close)

    def _connect(self) -> None:
        self._require_pin_and_key()
        client = self._pinned_client()
        try:
            client.connect(
                self.address.host,
                port=self.address.port,
                username=self.address.user,
                key_filename=None if self.key is None else str(self.key),
                look_for_keys=self.use_agent,
                allow_agent=self.use_agent,
                timeout=CONNECT_TIMEOUT_S,
                banner_timeout=CONNECT_TIMEOUT_S,
                auth_timeout=CONNECT_TIMEOUT_S,
            )
            self._sftp = client.open_sftp()
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyMismatch(
                str(self.address), fingerprint(exc.expected_key), fingerprint(exc.key)
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise SshError(
                f"{self.address} refused the key {self.key or '(agent)'} ({exc}); the board "
                "accepts keys "
                "in ~USER/.ssh/authorized_keys (firmware build --ssh-key PUB puts one there)"
            ) from None
        except SshError:
            client.close()
            raise
        except (paramiko.SSHException, OSError) as exc:
            client.close()
            raise SshError(f"cannot connect to {self.address}: {exc}") from None
        self._client = client

    def _require_pin_and_key(self) -> None:
        """Refuse to connect without a pinned host key and a login key."""
        if self.pin.known_hosts is None and self.pin.host_key is None:
            raise SshError(
                f"no host key pinned for {self.address}: give --known-hosts FILE or "
                "--host-key 'TYPE BASE64' (hil never trusts a key on first use)"
            )
        if self.key is None and not self.use_agent:
            raise SshError("no login key: give --key PATH (or --use-agent for your agent's keys)")
        if self.key is not None and not self.key.is_file():
            raise SshError(f"the login key {self.key} does not exist")

    def _pinned_client(self) -> paramiko.SSHClient:
        """A client that trusts only the pinned host key(s) and refuses any other."""
        client = paramiko.SSHClient()
        if self.pin.known_hosts is not None:
            try:
                client.load_host_keys(str(self.pin.known_hosts))
            except OSError as exc:
                raise SshError(f"cannot read {self.pin.known_hosts}: {exc}") from exc
        if self.pin.host_key is not None:
            key = parse_public_key(self.pin.host_key)
            client.get_host_keys().add(self.address.known_hosts_name, key.get_name(), key)
        client.set_missing_host_key_policy(_RefuseUnknown())
        return client

    def _close(self) -> None:
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def client(self) -> paramiko.SSHClient:
        """The connected client; SshError when closed."""
        if self._client is None:
            raise SshError(f"not connected to {self.address}")
        return self._client

    @property
    def sftp(self) -> paramiko.SFTPClient:
        """The open SFTP session; SshError when closed."""
        if self._sftp is None:
            raise SshError(f"not connected to {self.address}")
        return self._sftp

    # --- commands ----------------------------------------------------------------

    async def run(self, command: str, timeout_s: float = COMMAND_TIMEOUT_S) -> Completed:
        """Run ``command`` on the board (its login shell) and wait for it."""
        return await asyncio.to_thread(self._run, command, timeout_s)

    def _run(self, command: str, timeout_s: float) -> Completed:
        try:
            _, out, err = self.client.exec_command(command, timeout=timeout_s)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
            code = out.channel.recv_exit_status()
        except (paramiko.SSHException, OSError) as exc:
            raise SshError(f"{self.address}: {command!r} failed to run: {exc}") from None
        return Completed(code, stdout, stderr)

    async def check(self, command: str, timeout_s: float = COMMAND_TIMEOUT_S) -> str:
        """``command``'s output; SshError naming the command and its stderr when it fails."""
        done = await self.run(command, timeout_s)
        if done.code != 0:
            raise SshError(
                f"{self.address}: {command!r} exited {done.code}: {done.stderr.strip()[:400]}"
            )
        return done.stdout

    # --- files -------------------------------------------------------------------

    async def read_bytes(self, path: str) -> bytes:
        """The board's file ``path``."""
        async with self._sftp_lock:
            return await asyncio.to_thread(self._read, path)

    def _read(self, path: str) -> bytes:
        try:
            with self.sftp.open(path, "rb") as f:
                return bytes(f.read())
        except OSError as exc:
            raise SshError(f"{self.address}: cannot read {path}: {exc}") from None

    async def put_atomically(self, data: bytes, folder: str, name: str) -> str:
        """Write ``folder/name`` as ``name.tmp`` then rename it; the final path."""
        async with self._sftp_lock:
            return await asyncio.to_thread(self._put, data, folder, name)

    def _put(self, data: bytes, folder: str, name: str) -> str:
        final = f"{folder.rstrip('/')}/{name}"
        partial = f"{final.rsplit('.', 1)[0]}.tmp"
        try:
            with self.sftp.open(partial, "wb") as f:
                f.write(data)
            self.sftp.posix_rename(partial, final)
        except OSError as exc:
            raise SshError(f"{self.address}: cannot write {final}: {exc}") from None
        return final

    async def listdir(self, folder: str) -> list[str]:
        """Names of the regular files in ``folder`` ([] when it does not exist)."""
        async with self._sftp_lock:
            return await asyncio.to_thread(self._listdir, folder)

    def _listdir(self, folder: str) -> list[str]:
        try:
            entries = self.sftp.listdir_attr(folder)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SshError(f"{self.address}: cannot list {folder}: {exc}") from None
        return sorted(e.filename for e in entries if stat.S_ISREG(e.st_mode or 0))

    # --- forwarding --------------------------------------------------------------

    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> LocalForward:
        """A local port that reaches ``remote_host:remote_port`` as seen from the board."""
        return LocalForward(self, remote_host, remote_port)


class LocalForward(Service):
    """Listens on a free loopback port; each connection is a direct-tcpip channel on the board."""

    def __init__(self, link: SshLink, remote_host: str, remote_port: int) -> None:
        self.link = link
        self.remote = (remote_host, remote_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._channels: set[paramiko.Channel] = set()

    async def start(self) -> None:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening; close every channel and stop every relay."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for channel in list(self._channels):
            channel.close()
        await cancel_and_wait(*self._tasks, reraise=False)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = self.link.client.get_transport()
        try:
            if transport is None:
                raise SshError("the SSH transport is closed")
            channel = await asyncio.to_thread(
                functools.partial(
                    transport.open_channel,
                    "direct-tcpip",
                    self.remote,
                    ("127.0.0.1", 0),
                    timeout=10.0,
                )
            )
        except (paramiko.SSHException, OSError, SshError):
            writer.transport.abort()
            return
        channel.settimeout(0.5)
        self._channels.add(channel)
        for pump in (self._to_board(reader, channel), self._from_board(channel, writer)):
            task = asyncio.create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _to_board(self, reader: asyncio.StreamReader, channel: paramiko.Channel) -> None:
        try:
            while data := await reader.read(65536):
                await asyncio.to_thread(channel.sendall, data)
        except (OSError, paramiko.SSHException):
            pass
        finally:
            channel.close()
            self._channels.discard(channel)

    async def _from_board(self, channel: paramiko.Channel, writer: asyncio.StreamWriter) -> None:
        try:
            while not channel.closed:
                try:
                    data = await asyncio.to_thread(channel.recv, 65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except (OSError, paramiko.SSHException):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.transport.abort()
