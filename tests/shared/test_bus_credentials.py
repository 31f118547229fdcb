"""Bus credentials: written private, read back, put into URLs, never shown in messages."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from shared.bus_credentials import (
    ADMIN_USER,
    BusCredentials,
    credentials_file,
    has_credentials,
    home_admin_url,
    redact,
    refused_message,
    with_home_credentials,
)
from shared.errors import BusCredentialsError


def test_written_owner_only_and_read_back(tmp_path: Path) -> None:
    creds = BusCredentials.generate("agent.edge_asr")
    path = credentials_file(tmp_path, creds.user)
    creds.write(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert BusCredentials.read(path) == creds
    assert BusCredentials.generate("x").password != BusCredentials.generate("x").password


def test_unreadable_file_names_itself(tmp_path: Path) -> None:
    bad = tmp_path / "admin.json"
    bad.write_text("{not json")
    with pytest.raises(BusCredentialsError, match=r"admin\.json"):
        BusCredentials.read(bad)


def test_url_carries_the_credentials_and_redact_hides_the_password() -> None:
    url = BusCredentials("router", "s3cret").url("nats://127.0.0.1:4222")
    assert url == "nats://router:s3cret@127.0.0.1:4222"
    assert has_credentials(url) and not has_credentials("nats://127.0.0.1:4222")
    assert redact(url) == "nats://router:***@127.0.0.1:4222"
    assert "s3cret" not in refused_message(url)
    assert "carries no credentials" in refused_message("nats://127.0.0.1:4222")


def test_admin_credentials_go_only_to_the_home_they_belong_to(tmp_path: Path) -> None:
    home = "nats://127.0.0.1:4222"
    assert home_admin_url(tmp_path, home) == home  # a home without authorization keeps none
    BusCredentials(ADMIN_USER, "pw").write(credentials_file(tmp_path, ADMIN_USER))
    assert home_admin_url(tmp_path, home) == "nats://admin:pw@127.0.0.1:4222"
    assert with_home_credentials(home, tmp_path, home) == "nats://admin:pw@127.0.0.1:4222"
    elsewhere = "nats://127.0.0.1:5555"
    assert with_home_credentials(elsewhere, tmp_path, home) == elsewhere
    own = "nats://me:mine@127.0.0.1:4222"
    assert with_home_credentials(own, tmp_path, home) == own
