"""Streaming zstd compression and decompression that hash as they go.

Nothing is held in memory beyond one chunk: a multi-GiB image goes through in
``CHUNK`` sized pieces, and the sha256 of what is read or written comes out of
the same pass.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import zstandard

CHUNK = 4 * 1024 * 1024
# Level 3 (zstd's default): measured on a 1.1 GiB qemu image, 2.5 s for 188 MiB,
# where level 9 took 14 s for 169 MiB. Single threaded, so the same input
# always gives the same bytes.
LEVEL = 3

Progress = Callable[[int], None]


def _ignore(_count: int) -> None:
    return None


@dataclass(frozen=True)
class Digests:
    """The sha256 and size of the raw image and of its compressed form."""

    raw_sha256: str
    raw_size: int
    compressed_sha256: str
    compressed_size: int


class _HashingWriter:
    """A file-like sink that hashes and counts what the compressor writes."""

    def __init__(self, sink: BinaryIO) -> None:
        self.sink = sink
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.sink.write(data)


def compress_file(source: Path, target: Path, on_progress: Progress = _ignore) -> Digests:
    """Compress ``source`` to ``target`` (zstd, one frame with its content size)."""
    raw = hashlib.sha256()
    raw_size = 0
    compressor = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True, threads=0)
    size = source.stat().st_size
    with source.open("rb") as reader, target.open("wb") as out:
        sink = _HashingWriter(out)
        with compressor.stream_writer(sink, size=size, closefd=False) as writer:  # type: ignore[arg-type]
            while chunk := reader.read(CHUNK):
                raw.update(chunk)
                raw_size += len(chunk)
                writer.write(chunk)
                on_progress(len(chunk))
    return Digests(raw.hexdigest(), raw_size, sink.digest.hexdigest(), sink.size)


def decompressed_chunks(source: Path, on_progress: Progress = _ignore) -> Iterator[bytes]:
    """The decompressed bytes of the zstd file ``source``, chunk by chunk."""
    decompressor = zstandard.ZstdDecompressor()
    with source.open("rb") as reader, decompressor.stream_reader(reader) as stream:
        while chunk := stream.read(CHUNK):
            on_progress(len(chunk))
            yield chunk


def file_sha256(
    path: Path, limit: int | None = None, on_progress: Progress = _ignore
) -> tuple[str, int]:
    """The sha256 and byte count of ``path`` (only its first ``limit`` bytes, if given)."""
    digest = hashlib.sha256()
    count = 0
    with path.open("rb") as reader:
        while limit is None or count < limit:
            want = CHUNK if limit is None else min(CHUNK, limit - count)
            chunk = reader.read(want)
            if not chunk:
                break
            digest.update(chunk)
            count += len(chunk)
            on_progress(len(chunk))
    return digest.hexdigest(), count


def zstd_content_size(source: Path) -> int | None:
    """The decompressed size recorded in the zstd frame header, if it is there."""
    with source.open("rb") as reader:
        header = reader.read(18)
    size = zstandard.frame_content_size(header)
    return None if size < 0 else size
