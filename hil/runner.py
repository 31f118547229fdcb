"""Running suites of named cases against a target, each under its own time limit.

A case is an async function taking the run context; it returns its
measurements, or raises :class:`CaseFailed` with a reason a person can act on.
Anything else it raises is an *error* (the harness or the target broke), kept
apart from a *failure* (the board did the wrong thing).

The harness's exceptions, under :class:`shared.errors.TetherError`; the umbrella a
class also belongs to is in parentheses::

    HilError
    ├── CaseFailed            the target did the wrong thing (a failure, not an error)
    ├── UnknownSuite          (InputError) no registered suite has that name
    ├── BadOption             (InputError) an option of ``hil run`` that does not parse
    ├── TargetDown            (ConfigurationError) the target could not be brought up with
    │                         what it was given (``hil run`` exits 2, as for bad usage)
    ├── BadTarget             (InputError) a --target or --relay that does not parse
    │                         (:mod:`hil.targets.address`)
    ├── ProfileError          (ConfigurationError) a board profile cannot be read
    │                         (:mod:`hil.targets.profile`)
    ├── EdgeConfigError       (ConfigurationError) the board's edge.yaml lacks what hil
    │                         needs (:mod:`hil.targets.edge_view`)
    └── SshError              (LinkError) cannot connect, log in or run something
        ├── HostKeyMismatch   (RefusedError) another key than the pinned one
        └── HostKeyUnknown    (RefusedError) nothing is pinned for this host
                              (both in :mod:`hil.targets.sshlink`)
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from hil.model import CaseResult, Measurement, RunResult
from shared.errors import ConfigurationError, InputError, TetherError

C = TypeVar("C")


class HilError(TetherError):
    """Base of the HIL harness's exceptions."""


class CaseFailed(HilError):
    """The target did the wrong thing; ``reason`` says what was expected and what happened."""

    def __init__(self, reason: str, measurements: list[Measurement] | None = None) -> None:
        self.reason = reason
        self.measurements = measurements or []
        super().__init__(reason)


class UnknownSuite(HilError, InputError):
    """A suite name that no registered suite has."""


class BadOption(HilError, InputError):
    """An option of ``hil run`` does not parse; the message names it."""


class TargetDown(HilError, ConfigurationError):
    """The target could not be brought up (booted, reached, paired) with what it was given."""


CaseFn = Callable[[C], Awaitable[list[Measurement]]]


@dataclass(frozen=True)
class Case(Generic[C]):
    """One named check of a suite, with its time limit."""

    name: str
    run: CaseFn[C]
    timeout_s: float = 120.0


@dataclass(frozen=True)
class Suite(Generic[C]):
    """A named, ordered list of cases."""

    name: str
    cases: tuple[Case[C], ...]


async def run_case(
    suite: str, case: Case[C], ctx: C, logs: Callable[[], Awaitable[str]]
) -> CaseResult:
    """Run one case; never raises: the verdict and reason carry what happened."""
    start = time.monotonic()
    try:
        async with asyncio.timeout(case.timeout_s):
            measurements = await case.run(ctx)
    except CaseFailed as exc:
        return CaseResult(suite, case.name, "fail", time.monotonic() - start, exc.reason,
                          exc.measurements, await _safe(logs))  # fmt: skip
    except TimeoutError:
        return CaseResult(suite, case.name, "fail", time.monotonic() - start,
                          f"did not finish within {case.timeout_s:.0f} s", [],
                          await _safe(logs))  # fmt: skip
    # A case's boundary: whatever a case raises is its error result; the suite goes on.
    except Exception as exc:  # noqa: BLE001
        return CaseResult(suite, case.name, "error", time.monotonic() - start,
                          f"{type(exc).__name__}: {exc}",
                          [], traceback.format_exc() + "\n" + await _safe(logs))  # fmt: skip
    return CaseResult(suite, case.name, "pass", time.monotonic() - start, "", measurements)


async def _safe(logs: Callable[[], Awaitable[str]]) -> str:
    try:
        async with asyncio.timeout(30):
            return await logs()
    # Logs are best effort: a failure to fetch them is said in the report.
    except Exception as exc:  # noqa: BLE001
        return f"(could not fetch logs: {exc!r})"


async def run_suites(
    target: str,
    suites: list[Suite[C]],
    ctx: C,
    logs: Callable[[], Awaitable[str]],
    on_case: Callable[[CaseResult], None] | None = None,
) -> RunResult:
    """Run every case of every suite in order and collect the results."""
    started = datetime.now(UTC)
    results: list[CaseResult] = []
    for suite in suites:
        for case in suite.cases:
            result = await run_case(suite.name, case, ctx, logs)
            results.append(result)
            if on_case is not None:
                on_case(result)
    return RunResult(target, [s.name for s in suites], started, datetime.now(UTC), results)
