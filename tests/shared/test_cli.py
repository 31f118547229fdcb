"""The command-line wrapper: each error umbrella ends a command with its exit code and
one message naming the command and the error; every tether CLI goes through it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bridge.cli import app as bridge_app
from shared.cli import CommandApp, error_message, exit_code_for, finish
from shared.control import ControlReply
from shared.errors import (
    ConfigurationError,
    ContractError,
    ControlBadRequest,
    ControlError,
    ControlRefused,
    HomeNotRunning,
    InputError,
    LinkError,
    RefusedError,
    TetherError,
    UnavailableError,
    UsageError,
)
from shared.exit_codes import ExitCode

UMBRELLA_CODES = [
    (ConfigurationError, ExitCode.USAGE),
    (InputError, ExitCode.USAGE),
    (RefusedError, ExitCode.FAILURE),
    (UnavailableError, ExitCode.FAILURE),
    (LinkError, ExitCode.FAILURE),
    (TetherError, ExitCode.FAILURE),
]


class _SampleError(ContractError):
    """A package error under no umbrella: a failure."""


def raising_app(exc: BaseException) -> CommandApp:
    """An app whose one command ``go`` raises ``exc``, beside a command ``fine``."""
    app = CommandApp(name="sample")

    @app.command()
    def go() -> None:
        """Raise the error."""
        raise exc

    @app.command()
    def fine(found: bool = False) -> None:
        """Run to the end, finding problems or not."""
        print("ran")
        finish(ok=not found)

    return app


@pytest.mark.parametrize(("umbrella", "code"), UMBRELLA_CODES)
def test_each_umbrella_maps_to_its_exit_code(umbrella: type[TetherError], code: ExitCode) -> None:
    assert exit_code_for(umbrella("x")) is code


def test_a_package_error_takes_its_umbrellas_code() -> None:
    assert exit_code_for(UsageError("--device: bad")) is ExitCode.USAGE
    assert exit_code_for(HomeNotRunning("no home")) is ExitCode.FAILURE
    assert exit_code_for(_SampleError("broke")) is ExitCode.FAILURE


@pytest.mark.parametrize(("umbrella", "code"), UMBRELLA_CODES)
def test_a_command_that_raises_exits_with_the_code_and_one_message(
    umbrella: type[TetherError], code: ExitCode
) -> None:
    result = CliRunner().invoke(raising_app(umbrella("the thing is wrong")), ["go"])
    assert result.exit_code == code
    assert result.stderr == "sample go: error: the thing is wrong\n"
    assert result.stdout == ""


def test_the_message_names_the_command_and_the_error() -> None:
    assert error_message("home status", HomeNotRunning("no home")) == (
        "home status: error: no home"
    )


def test_markup_in_a_message_is_printed_as_it_is() -> None:
    result = CliRunner().invoke(raising_app(InputError("[red]not markup[/red]")), ["go"])
    assert result.stderr == "sample go: error: [red]not markup[/red]\n"


def test_anything_but_a_tether_error_keeps_its_traceback() -> None:
    result = CliRunner().invoke(raising_app(KeyError("bug")), ["go"])
    assert isinstance(result.exception, KeyError)


def test_findings_end_with_1_and_none_with_0() -> None:
    app = raising_app(TetherError("unused"))
    found = CliRunner().invoke(app, ["fine", "--found"])
    assert (found.exit_code, found.stdout, found.stderr) == (ExitCode.FAILURE, "ran\n", "")
    clean = CliRunner().invoke(app, ["fine"])
    assert (clean.exit_code, clean.stdout) == (ExitCode.OK, "ran\n")


@pytest.mark.parametrize(
    ("code", "cls", "exit_code"),
    [
        ("bad_request", ControlBadRequest, ExitCode.USAGE),
        ("not_found", ControlBadRequest, ExitCode.USAGE),
        ("refused", ControlRefused, ExitCode.FAILURE),
        ("overlap", ControlRefused, ExitCode.FAILURE),
        ("internal", ControlError, ExitCode.FAILURE),
    ],
)
def test_a_control_reply_code_maps_to_its_umbrella(
    code: str, cls: type[ControlError], exit_code: ExitCode
) -> None:
    with pytest.raises(ControlError) as raised:
        ControlReply.failure(code, "why").unwrap()
    assert type(raised.value) is cls and raised.value.code == code
    assert exit_code_for(raised.value) is exit_code


def test_a_cli_given_a_bad_file_exits_2_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("bridge: [unclosed\n")
    result = CliRunner().invoke(bridge_app, ["check", str(bad), str(bad)])
    assert result.exit_code == ExitCode.USAGE
    (first, *_) = result.stderr.splitlines()
    assert first.startswith(f"bridge check: error: {bad}")


def test_a_console_script_given_a_bad_file_exits_2_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "edge.yaml"
    bad.write_text("audio:\n  block_ms: many\n")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("edge")), "run", "--config", str(bad)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert done.stderr.startswith("edge run: error: ")
    assert f"{bad}:2" in done.stderr
