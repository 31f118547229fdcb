"""The hypothesis profile a run gets: fixed and repeatable under CI, random on a desk."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from tests.shared import test_event
from tests.support import hypothesis_profiles

REPO = Path(__file__).resolve().parents[1]
# What a process sees once tests/conftest.py has been imported, as pytest imports it.
PROBE = (
    "import tests.conftest\n"
    "from hypothesis import settings\n"
    "s = settings()\n"
    "print(settings.get_current_profile_name(), s.derandomize, s.max_examples,"
    " s.deadline, s.database)\n"
)
CI_PROFILE = ["ci", "True", str(hypothesis_profiles.CI_MAX_EXAMPLES), "None", "None"]


def _environment(ci: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def _probe(ci: str | None) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=_environment(ci), capture_output=True,
        text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.split()


def test_under_ci_every_property_runs_a_fixed_derandomized_budget_with_no_database() -> None:
    assert _probe("true") == CI_PROFILE


@pytest.mark.parametrize("ci", [None, "", "false", "0"])
def test_outside_ci_properties_stay_random(ci: str | None) -> None:
    name, derandomize, *_ = _probe(ci)
    assert (name, derandomize) == ("dev", "False")


def test_the_ci_entry_point_hands_the_tests_the_ci_profile(tmp_path: Path) -> None:
    """``.ci/run`` ends in ``make test``; a stand-in ``make`` probes what the tests would get."""
    out = tmp_path / "probe.txt"
    make = tmp_path / "make"
    make.write_text(f'#!/bin/sh\n"{sys.executable}" -c \'{PROBE}\' > "{out}"\n')
    make.chmod(make.stat().st_mode | stat.S_IXUSR)
    env = _environment(None)
    env["PATH"] = f"{tmp_path}{os.pathsep}{env['PATH']}"
    subprocess.run([str(REPO / ".ci/run")], env=env, timeout=120, check=True)
    assert out.read_text().split() == CI_PROFILE


def test_a_test_modules_own_settings_inherit_the_loaded_profile() -> None:
    """A module-level @settings copies the profile loaded when it was built."""
    own = test_event.test_fuzzed_objects_parse_or_name_a_key._hypothesis_internal_use_settings  # type: ignore[attr-defined]
    loaded = settings.get_profile(settings.get_current_profile_name())
    assert own.max_examples == 400
    assert (own.derandomize, own.database, own.deadline) == (
        loaded.derandomize, loaded.database, loaded.deadline,
    )  # fmt: skip
    assert settings.get_current_profile_name() == hypothesis_profiles.profile_for(os.environ)
