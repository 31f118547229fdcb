"""README.md as a script: the fenced commands of the sections a newcomer runs first.

In the sections named in :data:`SECTIONS`, every ```` ```sh ```` block is a list of
commands, run in order in one shell; each must exit 0. A ```` ```text ```` block right
after a ``sh`` block lists lines its output must contain (each line a substring of the
block's output). Commands that end in ``&`` run in the background, their output kept
in a log of their own so it cannot interleave with what a later command prints.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SECTIONS = (
    "Running home",
    "Talking to home without a board",
    "Memory",
    "Growing past one machine",
)
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = "@@readme-step"


@dataclass
class Block:
    """One ``sh`` block: its commands, where it stands, and what its output must show."""

    section: str
    line: int
    commands: list[str]
    expect: list[str] = field(default_factory=list)


@dataclass
class StepResult:
    """What one command did."""

    block: Block
    command: str
    code: int | None
    output: str


def command_lines(text: str) -> list[str]:
    """The commands of a block: comments and blank lines dropped, continuations joined."""
    commands: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = _strip_comment(raw).rstrip()
        if not line.strip() and not pending:
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        commands.append((pending + line).strip())
        pending = ""
    return [c for c in commands if c]


def _strip_comment(line: str) -> str:
    # A `#` that starts a word outside quotes starts a comment, as in the shell.
    quote: str | None = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def blocks(readme: str, sections: tuple[str, ...] | None = SECTIONS) -> list[Block]:
    """The ``sh`` blocks of ``sections`` (None: every section), in README order, each
    with its expectations."""
    found: list[Block] = []
    section = ""
    lines = readme.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        fence = _FENCE.match(line)
        if not fence:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        body = "\n".join(lines[i + 1 : end])
        wanted = sections is None or section in sections
        if wanted and fence.group(1) == "sh":
            found.append(Block(section, i + 1, command_lines(body)))
        elif (
            wanted
            and fence.group(1) == "text"
            and found
            and found[-1].line == _prev_block_line(lines, i)
        ):
            found[-1].expect = [ln.strip() for ln in body.splitlines() if ln.strip()]
        i = end + 1
    return found


def _prev_block_line(lines: list[str], text_fence: int) -> int:
    # The line (1-based) of the fence that opens the block just above, if only blanks
    # stand between its closing fence and this one.
    j = text_fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    if j < 0 or lines[j].strip() != "```":
        return -1
    j -= 1
    while j >= 0 and not _FENCE.match(lines[j]):
        j -= 1
    return j + 1


def script(steps: list[Block], logs: Path) -> str:
    """One bash script running every command, marking where each starts and how it ended."""
    out = ["set +e"]
    n = 0
    for block in steps:
        for command in block.commands:
            line = command
            if command.endswith("&") and not command.endswith("&&"):
                log = shlex.quote(str(logs / f"bg-{n}.log"))
                line = f"{command[:-1].rstrip()} >{log} 2>&1 &"
            out += [f"echo {_MARK} {n}", line, f"echo {_MARK} {n} rc=$?"]
            n += 1
    return "\n".join(out) + "\n"


def run(
    steps: list[Block], *, cwd: Path, env: dict[str, str], timeout_s: float
) -> list[StepResult]:
    """Run the walkthrough in one shell; every step's exit code and output.

    The shell runs in a session of its own, which is ended on the way out, so nothing
    the walkthrough started in the background outlives it.
    """
    logs = cwd / "walkthrough-logs"
    logs.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-c", script(steps, logs)],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    ) as proc:
        try:
            raw, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            raw, _ = proc.communicate(timeout=60)
        finally:
            _end_session(proc.pid)
    return _split(steps, raw.decode(errors="replace"))


def _end_session(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    os.killpg(pgid, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.2)


def _split(steps: list[Block], output: str) -> list[StepResult]:
    results: list[StepResult] = []
    n = 0
    for block in steps:
        for command in block.commands:
            start = output.find(f"{_MARK} {n}\n")
            end = re.search(rf"{_MARK} {n} rc=(\d+)\n", output)
            if start < 0 or end is None:
                results.append(
                    StepResult(block, command, None, output[start:] if start >= 0 else "")
                )
            else:
                body = output[start + len(f"{_MARK} {n}\n") : end.start()]
                results.append(StepResult(block, command, int(end.group(1)), body))
            n += 1
    return results


def failures(results: list[StepResult]) -> list[str]:
    """Every command that did not exit 0, and every expected line a block did not print."""
    problems = []
    by_block: dict[int, list[StepResult]] = {}
    for result in results:
        by_block.setdefault(result.block.line, []).append(result)
        if result.code != 0:
            where = f"README.md:{result.block.line} ({result.block.section})"
            problems.append(
                f"{where}: `{result.command}` exited {result.code}:\n{result.output[-3000:]}"
            )
    for line, group in by_block.items():
        output = "".join(r.output for r in group)
        for expected in group[0].block.expect:
            if expected not in output:
                problems.append(
                    f"README.md:{line} ({group[0].block.section}): the output lacks {expected!r}:\n"
                    f"{output[-3000:]}"
                )
    return problems
