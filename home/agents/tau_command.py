"""How one agent's τ process is started: its argv, its environment, its τ home.

Pure functions over the catalog entry (:class:`shared.schema.catalog.NodeSpec`):
everything is decided here before the process exists, because a flag cannot be
added to a running subprocess. Extensions are handed by path, never imported;
what each needs is read from its file with :mod:`ast`:

- ``TOUCHES_BUS = True`` (τ's own declaration) → ``--bus`` is passed, and only then;
- ``RUN_CONTEXT = ("agent", "nats_url", ...)`` → the run-context facts the node
  adds to that extension's config; an extension gets only what it names.

Extension configs go into the τ home's ``config.json`` (``"extensions"``, mode
0600), not onto the command line: ``nats_url`` carries the node's bus credentials
(docs/architecture.md "Security"), and a command line is readable by anyone on
the machine.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from home.agents.errors import AgentConfigError
from home.agents.sessions import SessionStore, store_flags
from home.llm.endpoint import ModelEndpoint
from shared.files import write_atomic
from shared.schema.catalog import NodeSpec
from shared.subjects import VERBS, workspace_in_subject

# The only variables of the node's environment τ inherits; everything else is dropped.
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")

# Run-context facts an extension may ask for in its RUN_CONTEXT tuple.
RUN_CONTEXT_KEYS = ("agent", "nats_url", "binding_file", "jmfts_url", "jmfts_token_file")

# τ's builtin bus extension, named as an installed module rather than a path.
NATS_BUS_MODULE = "tau_agent_core.extensions_builtin.nats_bus"

# The τ config name of the one model entry the node writes.
MODEL_ENTRY = "agent"

# Names no tool: the embedded model answers in prose, which the handset speaks
# (home/llm/endpoint.py; measured by `make bench NAME=answers`).
DEFAULT_SYSTEM_PROMPT = (
    "You are a voice assistant at home. The user speaks to you through a small "
    "device and hears your answers read aloud. Answer in one or two short, plain "
    "spoken sentences, in your own words. No lists, tables, code or links."
)


@dataclass(frozen=True)
class RunContext:
    """Facts about this run that extensions may ask for (see :data:`RUN_CONTEXT_KEYS`)."""

    agent: str
    nats_url: str
    binding_file: Path
    jmfts_url: str | None = None
    jmfts_token_file: Path | None = None

    def value(self, key: str) -> str | None:
        """The fact named ``key`` as a string, or None when this run has none."""
        value = getattr(self, key)
        return None if value is None else str(value)


@dataclass(frozen=True)
class ExtensionFile:
    """An extension (a file by path, or an installed module) and what it declares."""

    name: str
    path: Path
    touches_bus: bool
    run_context: tuple[str, ...]
    config: dict[str, Any]
    module: str | None = None

    @property
    def flag_value(self) -> str:
        """What ``--extension`` is given: the file path, or the module name."""
        return self.module or str(self.path)

    @property
    def config_name(self) -> str:
        """τ's identifier for it, the NAME of ``--ext-config NAME:KEY=VALUE``.

        A file's stem, or an installed module's full name (τ's extension_identifier).
        """
        return self.module or self.path.stem


@dataclass(frozen=True)
class TauLaunch:
    """Everything needed to start one τ process."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    tau_home: Path
    extensions: tuple[ExtensionFile, ...]
    # Each extension's config by its τ identifier, written into the τ home's config.json.
    extensions_config: dict[str, dict[str, Any]]

    @property
    def uses_bus(self) -> bool:
        """True when ``--bus`` is among the flags."""
        return "--bus" in self.argv


def tau_executable() -> str:
    """The ``tau`` console script of the running interpreter's environment."""
    beside = Path(sys.executable).with_name("tau")
    if beside.exists():
        return str(beside)
    raise AgentConfigError(f"no tau executable beside {sys.executable}: pip install ffwf-tau")


def read_extension(name: str, path: Path, config: dict[str, Any]) -> ExtensionFile:
    """Read an extension file's declarations without importing it."""
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentConfigError(f"extension {name!r}: cannot read {path}: {exc}") from exc
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise AgentConfigError(f"extension {name!r}: {path}:{exc.lineno}: {exc.msg}") from exc
    declared: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in ("TOUCHES_BUS", "RUN_CONTEXT"):
                try:
                    declared[target.id] = ast.literal_eval(node.value)
                except ValueError as exc:
                    raise AgentConfigError(
                        f"extension {name!r}: {path}:{node.lineno}: {target.id} must be a literal"
                    ) from exc
    run_context = tuple(declared.get("RUN_CONTEXT", ()))
    unknown = [k for k in run_context if k not in RUN_CONTEXT_KEYS]
    if unknown:
        raise AgentConfigError(
            f"extension {name!r}: {path}: RUN_CONTEXT names {unknown}; known: {RUN_CONTEXT_KEYS}"
        )
    return ExtensionFile(
        name=name,
        path=path,
        touches_bus=bool(declared.get("TOUCHES_BUS", False)),
        run_context=run_context,
        config=dict(config),
    )


def extension_config(ext: ExtensionFile, context: RunContext) -> dict[str, Any]:
    """The extension's catalog config plus the run-context facts it names."""
    values: dict[str, Any] = dict(ext.config)
    for key in ext.run_context:
        fact = context.value(key)
        if fact is not None:
            values[key] = fact
    return values


def builtin_nats_bus(spec: NodeSpec, context: RunContext) -> ExtensionFile:
    """τ's own builtin ``nats_bus`` as the whole agent: the other posture (kind tau_bus_agent).

    τ subscribes the agent's inbound rail itself and drives one turn per event;
    its verbs publish on ``events.workspace.<agent>.out.<verb>`` (``speak`` without
    a device token, which the router resolves from the binding id). The node
    catalog's ``config.nats_bus`` adds to or overrides the defaults here.
    """
    config: dict[str, Any] = {
        "workspace": context.agent,
        "inbound_subject": workspace_in_subject(context.agent),
        "nats_url": context.nats_url,
        "origin_node": spec.name,
        "verbs": ["speak"],
    }
    extra = spec.config.get("nats_bus", {})
    if not isinstance(extra, dict):
        raise AgentConfigError(f"{spec.name}: config.nats_bus must be a mapping")
    config.update(extra)
    return ExtensionFile(
        name="nats_bus",
        path=Path(NATS_BUS_MODULE),
        touches_bus=True,
        run_context=(),
        config=config,
        module=NATS_BUS_MODULE,
    )


def write_tau_home(
    tau_home: Path,
    model: ModelEndpoint,
    extensions: dict[str, dict[str, Any]] | None = None,
    session_store: dict[str, Any] | None = None,
) -> None:
    """Write the τ home the process runs with: one model entry, the extensions' configs,
    and the session store when it is not the file store named on the command line.

    Created 0600: the extensions' configs carry the node's bus credentials, and a
    JMFTS session store's section holds the agent's token.
    """
    tau_home.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "models": {MODEL_ENTRY: model.tau_entry()},
        "default_model": MODEL_ENTRY,
        "extensions": extensions or {},
    }
    if session_store is not None:
        config["session_store"] = session_store
    write_atomic(tau_home / "config.json", json.dumps(config, indent=2), private=True)


def protocol(names: list[str] | tuple[str, ...], *, before_model: bool) -> str:
    """The short text a tool-calling model's system prompt gains for the verbs it is
    offered: when to use each (their descriptions in home/tau_extensions/verbs.py say it
    too, where the tool is listed). ``before_model``: the node's verb desk carries
    reminders and forgetting out first."""
    when = {
        "journal_append": "journal_append when asked to note or write something down",
        "jmfts_write": "jmfts_write when asked to keep a record for later",
        "delegate": "delegate when asked to ask the operator, or about something said "
        "before that your memories do not show",
    }
    uses = [when[name] for name in names if name in when]
    if not uses:
        return ""
    text = " Besides answering, you can act: call " + "; ".join(uses) + ". Otherwise just answer."
    if before_model:
        text += " Reminders, timers and forgetting are done before you see the request."
    return text


def system_prompt_for(spec: NodeSpec, *, calls_tools: bool, before_model: bool) -> str:
    """The agent's system prompt: its catalog's (or the default), and, for a model that
    calls tools, when to use the verbs it is offered (:func:`protocol`;
    a small model answering in prose is offered none)."""
    base = str(spec.config.get("system_prompt", DEFAULT_SYSTEM_PROMPT))
    if not calls_tools:
        return base
    offered: list[str] = next(
        (list(ext.config.get("verbs", VERBS)) for ext in spec.extensions if ext.name == "verbs"),
        [],
    )
    return base + protocol(offered, before_model=before_model)


def build_launch(
    spec: NodeSpec,
    *,
    repo_root: Path,
    run_dir: Path,
    context: RunContext,
    system_prompt: str | None = None,
    extra_extensions: tuple[ExtensionFile, ...] = (),
    environ: dict[str, str] | None = None,
    sessions: SessionStore | None = None,
) -> TauLaunch:
    """The full launch of ``spec``'s τ process (headless, no built-in tools, by-path extensions).

    ``run_dir`` is where the τ home and the process's working directory go.
    Extension paths in the catalog are relative to ``repo_root``. ``sessions`` names
    the store the node's per-device conversations are kept in (docs/architecture.md
    "Sessions"); the conversation τ starts on is never one of them.
    """
    if spec.kind == "tau_agent":
        extensions = [
            read_extension(ext.name, _resolve(repo_root, ext.path), ext.config)
            for ext in spec.extensions
        ]
    elif spec.kind == "tau_bus_agent":
        extensions = [builtin_nats_bus(spec, context)]
    else:
        raise AgentConfigError(f"{spec.name}: kind {spec.kind!r} is not a τ agent")
    extensions.extend(extra_extensions)
    tau_home = run_dir / "tau-home"
    cwd = run_dir / "cwd"
    argv = [
        tau_executable(),
        "--mode",
        "rpc",
        "--model",
        MODEL_ENTRY,
        # No built-in tools (no shell: the model cannot read its own credential);
        # extension tools stay, which --no-tools would also remove.
        "--no-builtin-tools",
        "--no-extensions",
        *store_flags(sessions),
        "--no-context-files",
        "--no-skills",
        "--no-prompt-templates",
        "--system-prompt",
        system_prompt or str(spec.config.get("system_prompt", DEFAULT_SYSTEM_PROMPT)),
    ]
    if any(ext.touches_bus for ext in extensions):
        argv.append("--bus")
    for ext in extensions:
        argv += ["--extension", ext.flag_value]
    source = os.environ if environ is None else environ
    env = {k: source[k] for k in ENV_ALLOW if k in source}
    env["TAU_HOME"] = str(tau_home)
    env["HOME"] = str(run_dir)
    env["PYTHONUNBUFFERED"] = "1"
    return TauLaunch(
        argv=argv,
        env=env,
        cwd=cwd,
        tau_home=tau_home,
        extensions=tuple(extensions),
        extensions_config={ext.config_name: extension_config(ext, context) for ext in extensions},
    )


def _resolve(root: Path, path: str) -> Path:
    candidate = Path(path)
    return candidate if candidate.is_absolute() else (root / candidate).resolve()
