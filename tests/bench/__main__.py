"""``python -m tests.bench NAME``: run one benchmark module's ``main()``."""

from __future__ import annotations

import importlib
import sys


def run() -> int:
    """Import ``tests.bench.<NAME>`` and call its ``main()``."""
    if len(sys.argv) != 2 or not sys.argv[1].isidentifier():
        print("usage: python -m tests.bench NAME   (make bench NAME=x)", file=sys.stderr)
        return 2
    module = importlib.import_module(f"tests.bench.{sys.argv[1]}")
    module.main()
    return 0


if __name__ == "__main__":
    sys.exit(run())
