"""Kafka's batch codecs: the records section is compressed as one unit per batch."""

import enum
import gzip
import zlib

import lz4.frame
import zstandard

from kraft.records.record_errors import UnsupportedCompressionError


class Compression(enum.IntEnum):
    """The low three bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# Kafka's defaults: gzip level 6 (java.util.zip), zstd level 3, lz4 default frame settings.
_zstd_compressor = zstandard.ZstdCompressor(level=3)
_zstd_decompressor = zstandard.ZstdDecompressor()


def compress(codec: Compression, data: bytes) -> bytes:
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == Compression.LZ4:
        return lz4.frame.compress(data)
    if codec == Compression.ZSTD:
        return _zstd_compressor.compress(data)
    raise UnsupportedCompressionError(f"cannot write {codec.name} batches: codec not available")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Raises UnsupportedCompressionError for snappy and unknown codecs, ValueError for bad data."""
    try:
        if codec == Compression.GZIP:
            return gzip.decompress(data)
        if codec == Compression.LZ4:
            return lz4.frame.decompress(data)
        if codec == Compression.ZSTD:
            # Frames from other producers may omit the content size, so stream-decode.
            return _zstd_decompressor.decompressobj().decompress(data)
    except (OSError, EOFError, RuntimeError, zlib.error, zstandard.ZstdError) as e:
        raise ValueError(f"{Compression(codec).name} data does not decompress: {e}") from e
    if codec == Compression.SNAPPY:
        raise UnsupportedCompressionError("snappy batches are not supported; use gzip, lz4 or zstd")
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")
