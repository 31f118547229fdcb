"""README.md, followed to the letter on a fresh data directory (issue 15's walkthrough).

Every ``sh`` block of the README is run, here or by a test this file names:

- The first-hour sections (running home, talking without a board, memory, growing
  past one machine) run as written in one shell (:mod:`tests.readme.walkthrough`),
  with the embedded model, as a person's machine runs them: every command must
  exit 0 and print what the README shows. Only two things differ, both through the
  environment the README's commands already read: the bridge listens on a free port
  (``TETHER_BRIDGE_PORT``) and ``HOME`` is the test's folder, so ``~`` is fresh.
- The bridge blocks (``bridge pair``, ``bridge check``) run as written in a fresh
  folder holding a link to the repository's ``schemas/``, with ``/etc/tether``
  moved under that folder.
- Every other command needs what the suite's machine has only in another shape (a
  desktop's sound card, a real board at ``board.lan``, a disk at ``/dev/sdX``) or is
  the suite itself; :data:`ELSEWHERE` names the test that runs it. A block that is
  neither run here nor named there fails :func:`test_every_block_is_run_somewhere`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.proc import free_port
from tests.readme.walkthrough import SECTIONS, Block, blocks, failures, run

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Run by test_the_bridge_blocks_run_as_written, wherever they stand in the README.
BRIDGE_COMMANDS = ("bridge pair ", "bridge check ")
# What the bridge blocks write to the machine's /etc goes under the test's folder.
MOVED = {"/etc/tether": "etc/tether"}


@dataclass(frozen=True)
class Elsewhere:
    """Where a README command that is not run here is run, and why not here."""

    test: str  # ``path::function``, or a path the suite itself runs
    why: str


# The first words of each command not run here (the longest that fits wins).
ELSEWHERE = {
    "make test": Elsewhere(".ci/run", "it is this suite: CI's .ci/run calls it"),
    "make up": Elsewhere(
        "tests/edge/tui/test_up_script.py::test_up_script_opens_the_tui_and_quitting_stops_home",
        "after the bootstrap `make test` shares, it runs scripts/up.sh, which opens a TUI;"
        " the test runs it in tmux with the embedded model and quits it",
    ),
    "edge run": Elsewhere(
        "tests/hil/test_virtual.py::test_a_healthy_virtual_board_passes_smoke_turn_and_linkdrop",
        "runs until stopped on the desktop's sound devices; the virtual board runs it on a"
        " PulseAudio null sink, bridged to home",
    ),
    "edge run -c edge.yaml --audio-in": Elsewhere(
        "tests/edge/test_cli.py::test_a_file_turn_is_answered_played_and_the_run_exits",
        "needs a board's edge.yaml and a recorded turn, which the test makes",
    ),
    "firmware build --device board --profile rpi": Elsewhere(
        "tests/firmware/test_staging.py::test_rpi_boot_files_are_the_firmware_folder",
        "the same arm64 build as the qemu image below but for its boot folder, which the"
        " test stages; a second rootfs would cost the suite minutes",
    ),
    "firmware flash": Elsewhere(
        "tests/firmware/test_flash.py::test_cli_exit_codes",
        "/dev/sdX is a person's SD card; the test flashes a loop device and a file",
    ),
    "firmware build --device tui --profile qemu": Elsewhere(
        "tests/hil/test_qemu.py::test_a_booted_image_is_ready_with_home_down_then_driven_like_a_real_board",
        "the suite builds the qemu image once (tests/support/board_image.py) and boots it",
    ),
    "hil run --target virtual": Elsewhere(
        "tests/hil/test_virtual.py::test_a_healthy_virtual_board_passes_smoke_turn_and_linkdrop",
        "the same suites on the same target, with the scripted model",
    ),
    "hil run --target ssh://": Elsewhere(
        "tests/hil/test_ssh_board.py::test_a_board_over_ssh_passes_smoke_turn_and_linkdrop_then_fails_when_broken",
        "board.lan is a real board; the test's board is an OpenSSH server on loopback",
    ),
    "hil run --target qemu:": Elsewhere(
        "tests/hil/test_qemu.py::test_a_booted_image_is_ready_with_home_down_then_driven_like_a_real_board",
        "boots the image the suite builds once",
    ),
}


def _env(home: Path, llm_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "XDG_"))}
    env.update(
        HOME=str(home),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        TETHER_BRIDGE_PORT=str(free_port()),
    )
    if llm_url is not None:
        env["TETHER_LLM_URL"] = llm_url
    return env


def _elsewhere(command: str) -> Elsewhere | None:
    fits = [prefix for prefix in ELSEWHERE if command.startswith(prefix)]
    return ELSEWHERE[max(fits, key=len)] if fits else None


def _test_exists(test: str) -> bool:
    path, _, function = test.partition("::")
    if not (ROOT / path).is_file():
        return False
    text = (ROOT / path).read_text()
    return not function or f"def {function}(" in text


def test_every_block_is_run_somewhere() -> None:
    readme = (ROOT / "README.md").read_text()
    walked = {(b.line, c) for b in blocks(readme) for c in b.commands}
    nowhere = []
    for block in blocks(readme, sections=None):
        for command in block.commands:
            if (block.line, command) in walked or command.startswith(BRIDGE_COMMANDS):
                continue
            where = _elsewhere(command)
            if where is None:
                nowhere.append(f"README.md:{block.line} ({block.section}): {command}")
            else:
                assert _test_exists(where.test), f"{command}: no test {where.test}"
    assert not nowhere, "run by no test:\n" + "\n".join(nowhere)
    # Nothing named here that the README no longer says.
    commands = [c for b in blocks(readme, sections=None) for c in b.commands]
    stale = [p for p in ELSEWHERE if not any(c.startswith(p) for c in commands)]
    assert not stale, stale


def test_the_walkthrough_covers_every_section() -> None:
    found = blocks((ROOT / "README.md").read_text())
    assert {b.section for b in found} == set(SECTIONS)
    commands = [c for b in found for c in b.commands]
    # The first-hour path: start home, wait for it, talk through the bridge, use memory, stop.
    for needed in ("home up", "home status", "edge say", "home memory put", "home memory search"):
        assert any(c.startswith(needed) for c in commands), needed
    assert commands[-1].startswith("kill")


def test_a_command_that_fails_fails_the_walkthrough(tmp_path: Path) -> None:
    readme = (
        "## Running home\n\n```sh\nhome status --json   # no home runs here\n```\n\n"
        "## Memory\n\n```sh\necho kept\n```\n\n```text\nkept\nnot printed\n```\n"
    )
    steps = blocks(readme)
    env = _env(tmp_path, "http://127.0.0.1:9/v1")
    problems = failures(run(steps, cwd=tmp_path, env=env, timeout_s=60))
    assert len(problems) == 2
    assert "README.md:3 (Running home): `home status --json` exited 1" in problems[0]
    assert "lacks 'not printed'" in problems[1]


def test_parsing_joins_continuations_and_drops_comments() -> None:
    (block,) = blocks(
        "## Memory\n\n```sh\n# a note\nhome memory put a/b \\\n    'x # y'   # store\n```\n"
    )
    assert block == Block("Memory", 3, ["home memory put a/b      'x # y'"])


@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    steps = blocks((ROOT / "README.md").read_text())
    env = _env(tmp_path)  # no TETHER_LLM_URL: the embedded model, as `home up` has it
    results = await asyncio.to_thread(run, steps, cwd=tmp_path, env=env, timeout_s=1080)
    problems = failures(results)
    logs = sorted((tmp_path / "walkthrough-logs").glob("*.log"))
    tails = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs)
    assert not problems, "\n\n".join(problems) + "\n\n" + tails
    # The embedded model answered the first line through the bridge, in words (the later
    # ones are verbs, answered before the model).
    said = next(r for r in results if r.command.startswith("edge say"))
    answer = json.loads(said.output[said.output.index("{") :])["answer"]
    assert answer["kind"] == "speak" and answer["text"].strip(), answer


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_bridge_blocks_run_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    for old, new in MOVED.items():
        readme = readme.replace(old, new)
    steps = []
    for block in blocks(readme, sections=None):
        commands = [c for c in block.commands if c.startswith(BRIDGE_COMMANDS)]
        if commands:
            steps.append(Block(block.section, block.line, commands))
    assert len(steps) >= 3, steps
    (tmp_path / "schemas").symlink_to(ROOT / "schemas")
    results = run(steps, cwd=tmp_path, env=_env(tmp_path), timeout_s=240)
    problems = failures(results)
    assert not problems, "\n\n".join(problems)
    # Both pairings wrote two halves that check clean against each other.
    for out in ("etc/tether", "pairing"):
        assert (tmp_path / out / "board.edge.yaml").is_file()
        assert (tmp_path / out / "secrets" / "board.edge.key").stat().st_mode & 0o077 == 0
    checked = [r for r in results if r.command.startswith("bridge check --json")]
    assert checked and all(json.loads(r.output) is not None for r in checked)
