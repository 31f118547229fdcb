"""Streaming zstd: round trip over many chunks, digests of both sides, the frame's size."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import zstandard

from firmware.stream import (
    CHUNK,
    compress_file,
    decompressed_chunks,
    file_sha256,
    zstd_content_size,
)


def _data(path: Path, size: int) -> bytes:
    # Half random, half zeros: like a disk image with free space.
    data = os.urandom(size // 2) + bytes(size - size // 2)
    path.write_bytes(data)
    return data


def test_round_trip_over_several_chunks(tmp_path: Path) -> None:
    raw = tmp_path / "disk.img"
    data = _data(raw, 2 * CHUNK + 12345)
    seen: list[int] = []
    digests = compress_file(raw, tmp_path / "disk.img.zst", seen.append)
    assert sum(seen) == len(data) and len(seen) == 3
    assert digests.raw_sha256 == hashlib.sha256(data).hexdigest()
    assert digests.raw_size == len(data)
    packed = (tmp_path / "disk.img.zst").read_bytes()
    assert digests.compressed_sha256 == hashlib.sha256(packed).hexdigest()
    assert digests.compressed_size == len(packed) < len(data)
    chunks = list(decompressed_chunks(tmp_path / "disk.img.zst"))
    assert all(len(c) <= CHUNK for c in chunks)
    assert b"".join(chunks) == data
    assert zstd_content_size(tmp_path / "disk.img.zst") == len(data)
    # Any zstd reader can read it, not only ours.
    assert zstandard.ZstdDecompressor().decompress(packed) == data


def test_compression_is_deterministic(tmp_path: Path) -> None:
    raw = tmp_path / "disk.img"
    _data(raw, CHUNK + 1)
    first = compress_file(raw, tmp_path / "a.zst")
    second = compress_file(raw, tmp_path / "b.zst")
    assert first == second


def test_file_sha256_limit(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = _data(path, CHUNK + 100)
    assert file_sha256(path) == (hashlib.sha256(data).hexdigest(), len(data))
    assert file_sha256(path, limit=CHUNK + 1) == (
        hashlib.sha256(data[: CHUNK + 1]).hexdigest(),
        CHUNK + 1,
    )
    assert file_sha256(path, limit=10 * CHUNK)[1] == len(data)
