"""Which model the agents talk to: read once from ``--llm-url`` and ``--llm-model``.

``home up`` is told one of three things: nothing (it runs the embedded llama.cpp
server with the packaged model), ``none`` (no model; agents cannot start), or the
base URL of any OpenAI-compatible server. :class:`ModelChoice` is that answer as a
type, from which the ``llm`` component, the agent node's command line and the
node's :class:`~home.llm.endpoint.ModelEndpoint` are all made, so the address
keeps one form from the option to the request.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from home.llm.component import EmbeddedLlmComponent, ExternalLlmComponent
from home.llm.endpoint import ModelEndpoint, embedded_endpoint

#: What ``--llm-url`` says to run no model at all.
NO_MODEL = "none"


class LlmProfile(enum.StrEnum):
    """How an agent talks to its model."""

    #: The embedded llama.cpp server: answers in prose that the handset speaks.
    embedded = "embedded"
    #: Any other OpenAI-compatible server: tools offered freely.
    openai = "openai"


@dataclass(frozen=True)
class ModelChoice:
    """The embedded model (``url`` None), none (``off``), or the server at ``url``."""

    url: str | None = None
    model: str = "default"
    off: bool = False

    @classmethod
    def from_option(cls, llm_url: str | None, model: str = "default") -> ModelChoice:
        """Read ``--llm-url`` (None, ``none`` or a base URL) and ``--llm-model``."""
        if llm_url == NO_MODEL:
            return cls(None, model, off=True)
        return cls(None if llm_url is None else llm_url.rstrip("/"), model)

    @property
    def profile(self) -> LlmProfile:
        """The embedded profile for the embedded server, the OpenAI one for any other."""
        return LlmProfile.embedded if self.url is None else LlmProfile.openai

    def component(
        self, log_path: Path, host: str
    ) -> EmbeddedLlmComponent | ExternalLlmComponent | None:
        """The ``llm`` component ``home up`` runs for it (None: no model at all)."""
        if self.off:
            return None
        if self.url is None:
            return EmbeddedLlmComponent(log_path, host=host)
        return ExternalLlmComponent(self.url)

    def node_args(self, running_url: str) -> list[str]:
        """An agent node's options for the model now serving at ``running_url``."""
        return ["--llm-url", running_url, "--llm-profile", self.profile, "--llm-model", self.model]


def model_endpoint(
    url: str, profile: LlmProfile, model: str, answer_tool: str | None
) -> ModelEndpoint:
    """How an agent whose answers go through ``answer_tool`` asks the model at ``url``."""
    if profile is LlmProfile.embedded:
        return embedded_endpoint(url, answer_tool)
    return ModelEndpoint(base_url=url, model=model)
