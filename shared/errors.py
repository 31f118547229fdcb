"""The wire contract's exceptions.

ContractError
├── EnvelopeError          a field of an event is missing, mistyped or invalid
│   ├── EnvelopeTooLarge   the serialized event exceeds the configured limit
│   └── NotTextOnly        audio, bytes, a base64 blob or an oversize string
├── SubjectError           a subject, pattern or token is malformed
└── SchemaError            a YAML document (catalog, activation schema, bridge half)
                           is malformed; carries every issue with file, line and key
"""

from __future__ import annotations

from dataclasses import dataclass


class ContractError(Exception):
    """Base of every error raised by :mod:`shared`."""


class EnvelopeError(ContractError):
    """An event envelope failed validation; ``key`` names the offending field."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"envelope key {key!r}: {message}")


class EnvelopeTooLarge(EnvelopeError):
    """The serialized event is larger than the configured limit."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            "<event>", f"serialized event is {size} bytes, over the limit of {limit} bytes"
        )


class NotTextOnly(EnvelopeError):
    """The event carries something that is not text (audio, bytes, a blob, a huge string)."""


class SubjectError(ContractError):
    """A subject, subject pattern or subject token is malformed."""


@dataclass(frozen=True)
class SchemaIssue:
    """One problem in one YAML document, located by file, line and key path."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class SchemaError(ContractError):
    """A YAML document is malformed; ``issues`` lists every problem found."""

    def __init__(self, issues: list[SchemaIssue]) -> None:
        if not issues:
            raise ValueError("SchemaError needs at least one issue")
        self.issues = list(issues)
        super().__init__("\n".join(str(i) for i in self.issues))
