"""The memories one turn produced, as ``home trace`` prints them below the turn's events."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from home.substrate.cli.common import console
from home.substrate.eventlog import LoggedEvent
from shared.errors import EnvelopeError
from shared.event import Event
from shared.messages.memory import MemorizeReport, TurnMemory


def print_turn_memories(binding_id: str, found: Sequence[LoggedEvent]) -> None:
    """A table of the memories the turn's memorize reports name; nothing when there are none."""
    memories = [
        memory
        for item in found
        if item.event is not None and MemorizeReport.is_type(item.event.event_type)
        for memory in _memories(item.event)
    ]
    if memories:
        made = Table(title=f"memories turn {binding_id} produced (home memory show ID)")
        for column in ("id", "action", "replaces", "memory"):
            made.add_column(column, overflow="fold")
        for memory in memories:
            replaced = "" if memory.supersedes is None else f"#{memory.supersedes}"
            made.add_row(f"#{memory.id}", memory.action, replaced, escape(memory.fact))
        console.print(made)


def _memories(event: Event) -> list[TurnMemory]:
    """The memories one memorize report names; a malformed report names none."""
    try:
        return MemorizeReport.from_event(event).memories()
    except EnvelopeError:
        return []
