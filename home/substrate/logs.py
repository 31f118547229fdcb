"""Logging for ``home`` commands: rich lines for people, JSON lines (``--json``) for scripts."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from rich.console import Console
from rich.logging import RichHandler


class JsonLineFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message (and the exception)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        body = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, ensure_ascii=False)


def configure_logging(as_json: bool, level: int = logging.INFO) -> None:
    """Send log records to stderr, as JSON lines or through rich."""
    handler: logging.Handler
    if as_json:
        handler = logging.StreamHandler()
        handler.setFormatter(JsonLineFormatter())
    else:
        handler = RichHandler(console=Console(stderr=True), show_path=False)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # nats-py logs every reconnect attempt at error level while a server stops.
    logging.getLogger("nats").setLevel(logging.CRITICAL)
    # httpx logs every request at info: two health checks a second, each a rendered
    # line written from the loop the router shares (docs/architecture.md "Home").
    logging.getLogger("httpx").setLevel(logging.WARNING)
