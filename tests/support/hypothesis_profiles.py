"""The hypothesis profiles: ``ci`` when ``CI`` is set in the environment, ``dev`` otherwise.

CI runs each property on the same examples every time (derandomized, a fixed
budget, no saved database), so a red run is repeatable from its log and a green
one cannot turn red by luck; a case a random run finds is pinned with
``@example`` beside its test. A developer's run stays random and keeps its
database in ``.hypothesis/``, so what it finds is replayed first next time.
Neither has a deadline: the machine is shared and a slow example is not a bug
(each fuzz suite reports its slowest case instead, tests/support/fuzz_report.py).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

CI = "ci"
DEV = "dev"
# Hypothesis's own default; a test that needs another budget names it in @settings.
CI_MAX_EXAMPLES = 100
# Both build on hypothesis's defaults, never on whatever profile it chose itself
# (recent versions load their own "ci" when they see CI in the environment).
_BASE = settings.get_profile("default")

settings.register_profile(
    CI, _BASE, derandomize=True, max_examples=CI_MAX_EXAMPLES, deadline=None, database=None,
    print_blob=True, suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
settings.register_profile(DEV, _BASE, deadline=None, print_blob=True)


def profile_for(environ: dict[str, str] | os._Environ[str]) -> str:
    """The profile for an environment: ``ci`` when ``CI`` is set to anything but false."""
    return CI if environ.get("CI", "").lower() not in ("", "0", "false") else DEV


def load() -> str:
    """Load the profile this process's environment asks for; return its name.

    Called from tests/conftest.py before any test module is imported: a
    module-level ``@settings(...)`` copies what it does not name from the
    profile loaded when it is built.
    """
    name = profile_for(os.environ)
    settings.load_profile(name)
    return name
