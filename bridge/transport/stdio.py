"""stdin/stdout as the link's byte streams: the OpenSSH forced-command path (`bridge serve`)."""

from __future__ import annotations

import asyncio
import os
import sys


async def stdio_streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A reader on fd 0 and a writer on fd 1, both binary; nothing else may write to stdout."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**22)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(sys.stdin.fileno(), "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(sys.stdout.fileno(), "wb", 0)
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    return reader, writer
