"""The option every ``home`` command finds the running home by: ``--data-dir``.

Kept apart from the substrate's commands so that ``home memory`` and ``home jmfts``
declare it without loading them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from home.substrate.config import default_data_dir

DataDir = Annotated[
    Path,
    typer.Option(
        "--data-dir",
        help="The home's data directory (state file, NATS store, logs). "
        "Default: $TETHER_HOME_DIR, else $XDG_DATA_HOME/tether/home.",
        default_factory=default_data_dir,
        show_default=False,
    ),
]
