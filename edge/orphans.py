"""Children that never outlive the edge: the kernel stops them when the edge dies.

Passed as ``preexec_fn`` to the subprocesses the edge owns (nats-server, the
private PulseAudio daemon), so even ``kill -9`` of the edge leaves no orphan.
"""

from __future__ import annotations

import ctypes
import signal
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# Resolved once, before any fork: the child only makes one plain system call.
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def die_with_parent() -> None:
    """In the child, before exec: ask for SIGTERM when the parent goes away (Linux only).

    Linux ties this to the thread that forked, which for the edge is the event
    loop's thread and lives as long as the edge does.
    """
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
