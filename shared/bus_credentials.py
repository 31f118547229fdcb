"""Credentials on home's NATS bus: one user and password per node, kept in the data dir.

``home up`` writes one file per bus user under ``DATA_DIR/nats/users/<user>.json``
(mode 0600) and hands each child its own, by environment (docs/architecture.md
"Security"). A client puts them into the URL it connects with
(``nats://user:password@host:port``); nats-py reads them from there, and so does
τ's builtin ``nats_bus``, which takes nothing but a URL.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from shared.errors import BusCredentialsError
from shared.files import write_atomic

USERS_DIR = Path("nats") / "users"
ADMIN_USER = "admin"
PASSWORD_BYTES = 24


@dataclass(frozen=True)
class BusCredentials:
    """One bus user and its password."""

    user: str
    password: str

    @classmethod
    def generate(cls, user: str) -> BusCredentials:
        """A fresh random password for ``user``."""
        return cls(user, secrets.token_hex(PASSWORD_BYTES))

    @classmethod
    def read(cls, path: Path) -> BusCredentials:
        """The credentials in ``path`` (written by :meth:`write`)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(str(data["user"]), str(data["password"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BusCredentialsError(f"cannot read bus credentials {path}: {exc!r}") from None

    def write(self, path: Path) -> None:
        """Write to ``path``, readable by its owner only (created 0600, never wider)."""
        write_atomic(path, json.dumps({"user": self.user, "password": self.password}), private=True)

    def url(self, base_url: str) -> str:
        """``base_url`` with these credentials as its user info."""
        parts = urlsplit(base_url)
        host = parts.hostname or ""
        netloc = f"{self.user}:{self.password}@{host}"
        if parts.port is not None:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def credentials_file(data_dir: Path, user: str) -> Path:
    """Where ``user``'s credentials live under a home's data directory."""
    return data_dir / USERS_DIR / f"{user}.json"


def admin_url(data_dir: Path, base_url: str) -> str:
    """``base_url`` carrying the admin credentials of the home on ``data_dir``."""
    return BusCredentials.read(credentials_file(data_dir, ADMIN_USER)).url(base_url)


def home_admin_url(data_dir: Path, base_url: str) -> str:
    """``base_url`` with the admin credentials of the home on ``data_dir`` if it has any.

    A home whose bus runs without authorization keeps no credentials: ``base_url``
    as is then, and the server, not this function, decides.
    """
    if credentials_file(data_dir, ADMIN_USER).is_file():
        return admin_url(data_dir, base_url)
    return base_url


def with_home_credentials(url: str, data_dir: Path, home_url: str | None) -> str:
    """``url`` carrying credentials: its own, else the admin's of the home on ``data_dir``.

    The admin's are added only when ``url`` names that home's own server
    (``home_url``, from its state file): they are never sent anywhere else.
    """
    if has_credentials(url) or home_url is None:
        return url
    if _address(url) != _address(home_url):
        return url
    return home_admin_url(data_dir, url)


def _address(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.port)


def has_credentials(url: str) -> bool:
    """True if ``url`` carries a user and password."""
    parts = urlsplit(url)
    return bool(parts.username and parts.password)


def credentials_refused(exc: BaseException | None) -> bool:
    """True if a connection failed because the server refused its credentials (or none)."""
    return exc is not None and "authorization violation" in str(exc).lower()


def refused_message(url: str) -> str:
    """What to tell a person whose connection to ``url`` the server refused for credentials."""
    how = (
        "give --data-dir of that home (its admin credentials are used), or "
        "nats://USER:PASSWORD@HOST:PORT"
    )
    if not has_credentials(url):
        return f"{redact(url)} carries no credentials and home's bus refuses clients without; {how}"
    return f"{redact(url)}: the server refused these credentials (a home restarted?); {how}"


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***``, for logs and messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname or ''}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
