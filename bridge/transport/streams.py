"""The two byte-stream roles a link needs; SSH channels, stdio pipes and sockets all fit."""

from __future__ import annotations

from typing import Protocol


class ByteReader(Protocol):
    """Something to read bytes from; ``b""`` means the peer closed."""

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes, waiting for at least one (or EOF)."""
        ...


class ByteWriter(Protocol):
    """Something to write bytes to, with backpressure."""

    def write(self, data: bytes) -> None:
        """Queue ``data`` for sending."""
        ...

    async def drain(self) -> None:
        """Wait until the queue is small enough to write more."""
        ...

    def close(self) -> None:
        """Close the stream."""
        ...
