"""Stage-by-stage progress for long work: a protocol, a silent one, and a rich one."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text


@dataclass
class StageTime:
    """How long one stage took and what it produced."""

    stage: str
    seconds: float
    note: str = ""


class Reporter(Protocol):
    """What the build tells about its progress."""

    def stage(self, name: str, total: int | None = None) -> AbstractContextManager[None]:
        """A context manager around one stage (``total`` bytes, if known)."""
        ...

    def advance(self, count: int) -> None:
        """``count`` more bytes of the current stage are done."""

    def note(self, text: str) -> None:
        """A line of detail for the current stage (replaces the previous one)."""

    def finish(self, note: str) -> None:
        """Set the summary note of the current stage."""


class SilentReporter:
    """Records stage times and says nothing (tests, ``--json``)."""

    def __init__(self) -> None:
        self.times: list[StageTime] = []

    @contextmanager
    def stage(self, name: str, total: int | None = None) -> Iterator[None]:
        started = time.monotonic()
        self.times.append(StageTime(name, 0.0))
        try:
            yield
        finally:
            self.times[-1].seconds = time.monotonic() - started

    def advance(self, count: int) -> None:
        return None

    def note(self, text: str) -> None:
        return None

    def finish(self, note: str) -> None:
        if self.times:
            self.times[-1].note = note


class _BytesColumn(DownloadColumn):
    """Bytes done/total, only for stages that move a known number of bytes."""

    def render(self, task: Task) -> Text:
        return super().render(task) if task.fields.get("bytes") else Text("")


class RichReporter(SilentReporter):
    """One progress line per stage on the console: a bar when the size is known."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.progress = Progress(
            SpinnerColumn(finished_text="[green]✓[/green]"),
            TextColumn("[bold]{task.fields[stage]:<11}[/bold]"),
            BarColumn(bar_width=20),
            TimeElapsedColumn(),
            _BytesColumn(),
            TextColumn("{task.description}", style="dim"),
            console=console,
            transient=False,
        )
        self.task: TaskID | None = None

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.progress.stop()

    @contextmanager
    def stage(self, name: str, total: int | None = None) -> Iterator[None]:
        self.task = self.progress.add_task("", stage=name, total=total, bytes=total is not None)
        try:
            with super().stage(name, total):
                yield
        finally:
            task = self.task
            self.progress.update(task, description=self.times[-1].note[:60])
            if total is None:
                self.progress.update(task, total=1, completed=1)
            self.progress.stop_task(task)

    def advance(self, count: int) -> None:
        if self.task is not None:
            self.progress.advance(self.task, count)

    def note(self, text: str) -> None:
        if self.task is not None:
            self.progress.update(self.task, description=text[:60])
