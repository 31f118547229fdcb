"""How every tether command ends: the error umbrellas mapped to exit codes, one message.

Every command line (``bridge``, ``edge``, ``home``, ``firmware``, ``hil`` and the
node processes) is a :class:`CommandApp`, whose commands are :class:`ReportingCommand`.
A command does its work and raises the :class:`~shared.errors.TetherError` that names
what went wrong; it never picks an exit code. The command class catches the error,
prints one line on stderr, ``COMMAND: error: MESSAGE``, and exits with the code of
the error's umbrella::

    ConfigurationError, InputError       2  ExitCode.USAGE    what it was given is unusable
    RefusedError, UnavailableError,      1  ExitCode.FAILURE  it ran but could not finish
    LinkError, any other TetherError

A command that ran to its end and found problems (a check with findings, a failed
suite) prints them as its output and ends with :func:`finish`. Anything that is not a
TetherError is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand

from shared.errors import ConfigurationError, InputError, TetherError
from shared.exit_codes import ExitCode

F = TypeVar("F", bound=Callable[..., Any])

# The umbrellas that mean "what the command was given is unusable"; every other
# TetherError means it ran and could not finish.
USAGE_UMBRELLAS: tuple[type[TetherError], ...] = (ConfigurationError, InputError)


def exit_code_for(exc: TetherError) -> ExitCode:
    """The exit status a command ends with when ``exc`` stops it."""
    return ExitCode.USAGE if isinstance(exc, USAGE_UMBRELLAS) else ExitCode.FAILURE


def error_message(command: str, exc: TetherError) -> str:
    """The one line (more for an error that lists several issues) every command prints."""
    return f"{command}: error: {exc}"


def report_error(command: str, exc: TetherError) -> None:
    """Print :func:`error_message` on stderr, unwrapped, with ``error`` in red on a terminal."""
    Console(stderr=True, soft_wrap=True, highlight=False).print(
        f"{escape(command)}: [red]error[/red]: {escape(str(exc))}"
    )


class ReportingCommand(TyperCommand):
    """A Typer command whose TetherError becomes :func:`error_message` and its exit code."""

    # ``ctx`` is the click Context of the click that Typer vendors; Typer exports only its
    # subclass, which an override may not narrow the parameter to.
    def invoke(self, ctx: Any) -> Any:
        """Run the command; a TetherError it raises ends it as the module docstring says."""
        try:
            return super().invoke(ctx)
        except TetherError as exc:
            report_error(ctx.command_path, exc)
            ctx.exit(exit_code_for(exc))


class CommandApp(typer.Typer):
    """The Typer app of every tether command line: its commands are ReportingCommands."""

    def command(
        self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **settings: Any
    ) -> Callable[[F], F]:
        """Register a command as :meth:`typer.Typer.command` does, as a ReportingCommand."""
        return super().command(name, cls=cls or ReportingCommand, **settings)


def finish(*, ok: bool) -> None:
    """End a command that ran to its end and printed what it found: exit 1 unless ``ok``."""
    if not ok:
        raise typer.Exit(ExitCode.FAILURE)


@contextmanager
def interrupt_ends_cleanly() -> Iterator[None]:
    """Ctrl-C inside ends the command as asked (exit 0): for commands that follow until
    stopped, such as ``home events --follow``."""
    try:
        yield
    except KeyboardInterrupt:
        raise typer.Exit(ExitCode.OK) from None


def exit_before_command(exc: TetherError) -> NoReturn:
    """Leave a console script that could not load its command: the message alone (it names
    the script), and the exit code of ``exc``'s umbrella."""
    print(exc, file=sys.stderr)
    raise SystemExit(exit_code_for(exc)) from None
