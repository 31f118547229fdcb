"""How every program of tether replaces a file: written once, here.

:func:`write_atomic` writes a whole new file beside the old one and renames it
over it, so a reader (or a restart after kill -9) sees the old file or the new
one, never half of either. A private file is its owner's alone from its first
byte; a durable one is on disk, its name included, before the call returns.

Standard library only; the error is the builtin ``OSError``, which each caller
translates into its own.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

#: The mode of a file that is not private (what a umask of 022 gives a new file).
PUBLIC_MODE = 0o644
#: The mode of a private file: keys, tokens, passwords, configurations that hold them.
PRIVATE_MODE = 0o600


def write_atomic(
    path: Path, data: str | bytes, *, private: bool = False, durable: bool = False
) -> None:
    """Replace ``path`` with ``data`` whole (text is written as UTF-8).

    ``private``: created 0600 (its folder, when made here, 0700); else 0644.
    ``durable``: the file and the rename are synced to disk before returning.
    """
    path.parent.mkdir(mode=0o700 if private else 0o777, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                out.flush()
                os.fsync(out.fileno())
            os.fchmod(out.fileno(), PRIVATE_MODE if private else PUBLIC_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
