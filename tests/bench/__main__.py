"""Run benchmarks: ``python -m tests.bench [NAME ...]``; every module here with a ``main()``."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

HERE = Path(__file__).parent
# Parts of a benchmark, run by it: not benchmarks of their own.
NOT_BENCHMARKS = {"__main__", "report", "memory_corrections", "bridge_durable"}


def available() -> list[str]:
    """Names of the benchmark modules in this folder."""
    return sorted(m.name for m in pkgutil.iter_modules([str(HERE)]) if m.name not in NOT_BENCHMARKS)


def run(names: list[str]) -> int:
    """Run each named benchmark's ``main()``; return the number that failed."""
    failed = 0
    for name in names:
        if name not in available():
            print(f"no benchmark named {name!r}; available: {', '.join(available())}")
            return 2
        module = importlib.import_module(f"tests.bench.{name}")
        try:
            module.main()
        # One benchmark's failure, whatever it is, is reported and the others still run.
        except Exception as exc:  # noqa: BLE001
            print(f"benchmark {name} failed: {exc!r}")
            failed += 1
    return failed


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:] or available()))
