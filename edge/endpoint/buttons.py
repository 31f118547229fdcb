"""Push-to-talk sources: a GPIO line's value file, a terminal key, or a programmatic button.

Each is an async context manager with an async stream of :class:`ButtonEvent` s.
The GPIO button polls a sysfs-style value file (``/sys/class/gpio/gpioN/value``,
or any file holding ``0``/``1``), debounced over two reads. A terminal has no
key-up, so the key button toggles: first press talks, second press ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import termios
import time
import tty
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from edge.errors import ButtonError
from shared.lifecycle import Lifetime, Service


@dataclass(frozen=True)
class ButtonEvent:
    """The button went down (``pressed``) or up at monotonic time ``at``."""

    pressed: bool
    at: float


class Button(Lifetime, Protocol):
    """A push-to-talk source."""

    def events(self) -> AsyncIterator[ButtonEvent]:
        """Presses and releases in order, until closed."""
        ...


class ManualButton(Service):
    """A button pressed from code: the TUI, HIL and tests drive it."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[ButtonEvent | None] = asyncio.Queue()
        self.pressed = False

    async def close(self) -> None:
        """End the presses."""
        self._queue.put_nowait(None)

    def press(self) -> None:
        """Push the button down."""
        if not self.pressed:
            self.pressed = True
            self._queue.put_nowait(ButtonEvent(True, time.monotonic()))

    def release(self) -> None:
        """Let the button go."""
        if self.pressed:
            self.pressed = False
            self._queue.put_nowait(ButtonEvent(False, time.monotonic()))

    async def events(self) -> AsyncIterator[ButtonEvent]:
        """Presses and releases as they happen."""
        while (event := await self._queue.get()) is not None:
            yield event


class GpioValueButton(Service):
    """A button on a GPIO line, read from its value file (active low by default)."""

    def __init__(self, value_path: Path, *, active_low: bool = True, poll_ms: int = 10) -> None:
        self.value_path = value_path
        self.active_low = active_low
        self.poll_s = poll_ms / 1000
        self._state = False

    async def start(self) -> None:
        """Read the value file once, so a bad path fails at start and names the file."""
        self._state = self._read()

    def _read(self) -> bool:
        try:
            raw = self.value_path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ButtonError(f"GPIO value file {self.value_path}: cannot read: {exc}") from exc
        if raw not in ("0", "1"):
            raise ButtonError(f"GPIO value file {self.value_path}: expected 0 or 1, got {raw!r}")
        level = raw == "1"
        return not level if self.active_low else level

    async def events(self) -> AsyncIterator[ButtonEvent]:
        """Debounced edges: a new state counts once two reads in a row agree."""
        state = candidate = self._state
        while True:
            await asyncio.sleep(self.poll_s)
            now = self._read()
            if now != state and now == candidate:
                state = self._state = now
                yield ButtonEvent(state, time.monotonic())
            candidate = now


class TerminalKeyButton(Service):
    """A key on a terminal (stdin by default); each press toggles talking on and off."""

    def __init__(self, key: str = " ", fd: int | None = None) -> None:
        self.key = key
        self._fd = fd
        self._saved: list[Any] | None = None
        self._queue: asyncio.Queue[ButtonEvent | None] = asyncio.Queue()
        self._pressed = False

    @property
    def fd(self) -> int:
        """The terminal's file descriptor."""
        return sys.stdin.fileno() if self._fd is None else self._fd

    async def start(self) -> None:
        """Put the terminal in cbreak mode and listen for keys (ButtonError without a terminal)."""
        if not os.isatty(self.fd):
            raise ButtonError("push-to-talk source 'key' needs a terminal on stdin")
        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        asyncio.get_running_loop().add_reader(self.fd, self._on_key)

    async def close(self) -> None:
        """Restore the terminal and end the presses."""
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self.fd)
        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
        self._queue.put_nowait(None)

    def _on_key(self) -> None:
        typed = os.read(self.fd, 64).decode(errors="replace")
        for _ in range(typed.count(self.key)):
            self._pressed = not self._pressed
            self._queue.put_nowait(ButtonEvent(self._pressed, time.monotonic()))

    async def events(self) -> AsyncIterator[ButtonEvent]:
        """Toggles as the key is pressed."""
        while (event := await self._queue.get()) is not None:
            yield event
