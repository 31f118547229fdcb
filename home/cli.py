"""The ``home`` command: the root Typer app.

``home up`` belongs to the root itself (:mod:`home.up_command`); each part of
home registers its own commands or group.
"""

from __future__ import annotations

from home.agents.node_process import app as agent_app
from home.agents.sessions import turn_words
from home.agents.sessions_cli import sessions_app
from home.bridge.devices_cli import devices_app
from home.intent.cli import intent_app
from home.jmfts.cli import jmfts_app, memory_app
from home.llm.cli import app as llm_app
from home.memory.cli import register as register_memory_commands
from home.memory.trust_cli import register as register_trust_commands
from home.memory.turn_trace import print_turn_memories
from home.reminders.cli import reminders_app
from home.substrate.cli import register as register_substrate
from home.timeline import timeline
from home.up_command import up
from shared.cli import CommandApp

app = CommandApp(
    name="home",
    help="Mind at home: agents, memory (JMFTS), the language model and the event substrate.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("up")(up)
register_substrate(app, trace_annexes=[print_turn_memories])
app.add_typer(agent_app, name="agent", help="Run one τ agent node.")
app.add_typer(sessions_app, name="sessions")
app.add_typer(devices_app, name="devices")
app.add_typer(llm_app, name="llm")
app.add_typer(jmfts_app, name="jmfts")
register_memory_commands(memory_app)
register_trust_commands(memory_app, turn_words=turn_words)
app.add_typer(memory_app, name="memory")
app.add_typer(intent_app, name="intent")
app.add_typer(reminders_app, name="reminders")
app.command("timeline")(timeline)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
