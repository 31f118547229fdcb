"""``home devices list|unpair|revoke``: the boards paired with a running home.

Each command asks the running home (control verbs ``bridge.devices``,
``bridge.unpair``, ``bridge.revoke``), which acts at once and without a restart.
Exit codes: 0 done; 1 home is not running or would not do it; 2 bad usage, or a
device that is not paired here.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from home.bridge.devices import DeviceRemoved, DevicesView
from home.substrate.cli.common import AsJson, console, run_client
from home.substrate.options import DataDir
from shared import control
from shared.cli import CommandApp

devices_app = CommandApp(
    help="The boards paired with the running home. `list` shows each one, its key and its "
    "link, and every key ever revoked; `unpair DEVICE` forgets a board that is retired; "
    "`revoke DEVICE` refuses a board's key for good (a lost or stolen board). Both take "
    "effect at once: the key is no longer accepted, a live link is cut, the device's bus "
    "user is gone. To pair a board, see `bridge pair --help`.",
    no_args_is_help=True,
    add_completion=False,
)

Device = Annotated[str, typer.Argument(help="The device's name, as `home devices list` shows it.")]


@devices_app.command("list")
def list_devices(data_dir: DataDir, as_json: AsJson = False) -> None:
    """List the paired devices (name, key fingerprint, link state) and the revoked keys.

    A link is `up` while the board is connected; `not served` is a pairing the endpoint
    has not picked up yet; `refused: key revoked` is a half in DATA_DIR/bridge that
    authorizes a key revoked earlier (it is never served).

    Example:

        home devices list --json
    """
    view = DevicesView.from_dict(
        run_client(data_dir, lambda home: home.request(control.BRIDGE_DEVICES))
    )
    if as_json:
        print(json.dumps(view.to_dict(), indent=2))
        return
    if not view.paired:
        console.print("no device paired")
    else:
        table = Table("device", "key", "link")
        for row in view.paired:
            table.add_row(row.device, row.fingerprint, escape(row.link))
        console.print(table)
    if view.revoked:
        revoked = Table("revoked device", "key", "revoked at", title="revoked keys (refused)")
        for record in view.revoked:
            revoked.add_row(record.device, record.fingerprint, record.revoked_at[:19])
        console.print(revoked)


def _print_removed(removed: DeviceRemoved, as_json: bool) -> None:
    if as_json:
        print(json.dumps(removed.to_dict(), indent=2))
        return
    what = "revoked" if removed.revoked else "unpaired"
    console.print(
        f"{what} {escape(removed.device)} (key {removed.fingerprint}): "
        f"{removed.connections_closed} connection(s) closed, "
        f"{len(removed.files_removed)} file(s) removed",
        highlight=False,
    )


@devices_app.command("unpair")
def unpair(device: Device, data_dir: DataDir, as_json: AsJson = False) -> None:
    """Forget a device: for a board that is retired, or to start its pairing afresh.

    Its halves, its private key and its durable outbox (events still waiting for it)
    are removed from DATA_DIR/bridge; its key is no longer accepted, a live link is
    cut, its bus user is removed. Nothing is recorded: pairing the name again
    (`edge ... --data-dir`, `bridge pair`) makes a new device with a new key.
    For a board that is lost or stolen, use `revoke`.

    Example:

        home devices unpair kitchen
    """
    result = run_client(data_dir, lambda home: home.request(control.BRIDGE_UNPAIR, device=device))
    _print_removed(DeviceRemoved.from_dict(result, control.BRIDGE_UNPAIR), as_json)


@devices_app.command("revoke")
def revoke(device: Device, data_dir: DataDir, as_json: AsJson = False) -> None:
    """Refuse a device's key for good: for a board that is lost or stolen, or a key that leaked.

    Its key is recorded in DATA_DIR/bridge/revoked.json first, then it goes as with
    `unpair` (its outbox stays: it belongs to the name). The record is kept: the
    endpoint never accepts that key again, even if an old half authorizing it comes
    back. Pairing the name again makes a new key; the old one stays refused.

    Example:

        home devices revoke kitchen
    """
    result = run_client(data_dir, lambda home: home.request(control.BRIDGE_REVOKE, device=device))
    _print_removed(DeviceRemoved.from_dict(result, control.BRIDGE_REVOKE), as_json)
