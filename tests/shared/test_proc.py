"""A child dies with its parent (shared.proc.die_with_parent), even a parent that dies
while the child is still between its fork and its exec."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from shared.proc import die_with_parent

# The middle process starts ``sleep`` with die_with_parent, and is killed (a timer
# thread ends it) while the child, which has written its pid, is held one second
# before die_with_parent: the kernel has no parent death to report to a child that asks
# for one afterwards. ``home up`` killed while it starts a node is this.
MIDDLE = """
import os, subprocess, sys, threading, time
from shared.proc import die_with_parent

def late():
    os.write(int(sys.argv[1]), str(os.getpid()).encode())
    time.sleep(1.0)
    die_with_parent()

threading.Timer(0.5, os._exit, (0,)).start()
subprocess.Popen(["sleep", "60"], preexec_fn=late, pass_fds=(int(sys.argv[1]),))
"""

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie is dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def wait_dead(pid: int, within_s: float) -> bool:
    """Whether ``pid`` has died within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_child_whose_parent_died_before_its_exec_dies_too(tmp_path: Path) -> None:
    read, write = os.pipe()
    errors = tmp_path / "middle.stderr"
    try:
        with errors.open("w") as stderr:  # not a pipe: the child holds it open
            middle = subprocess.run(
                [sys.executable, "-c", MIDDLE, str(write)],
                cwd=ROOT, pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=stderr,
                check=False, timeout=60,
            )  # fmt: skip
    finally:
        os.close(write)
    with os.fdopen(read, "rb") as pid:
        child = int(pid.read())
    assert middle.returncode == 0, errors.read_text()
    try:
        assert wait_dead(child, 30.0), f"sleep {child} outlived the parent that started it"
    finally:
        if alive(child):
            os.kill(child, 9)


def test_a_child_whose_parent_lives_runs_on() -> None:
    child = subprocess.Popen(["sleep", "60"], preexec_fn=die_with_parent)  # noqa: PLW1509
    try:
        time.sleep(1.5)
        assert child.poll() is None, "the child died though its parent lives"
    finally:
        child.kill()
        child.wait()
