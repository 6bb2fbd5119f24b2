"""Credentials taken out of the metadata log before a client reads it (issue 25).

UserScramCredentialRecord holds a user's salt, StoredKey and ServerKey: with the salt and
StoredKey anyone can test password guesses offline (about 250 a second on one core in
Python, far more with a GPU). Nodes need those bytes, to authenticate users; no client
does, and Kafka serves them to none (DescribeUserScramCredentials answers mechanism and
iterations). So a batch holding such records goes to a client rewritten: the three fields
empty, every other byte of every record as it was, and the batch's offsets, timestamps,
record count, leader epoch and producer fields kept, its length and CRC recomputed
(`records.with_values`), so every Kafka client validates it and kraft's tools decode the
records, redacted. DelegationTokenRecord needs nothing: Kafka's schema carries the token's
id and times, not its HMAC, which is derived from delegation.token.secret.key and never
enters the log.

Whether a batch needs it is read from each record value's first two bytes (the frame version
and the API key, one byte each for every frame and type there is); a batch whose bytes hold
those two nowhere, the rule on a metadata log, is not even decoded (`redactions`).
"""

import bisect
import dataclasses
from collections.abc import Iterable, Iterator

from kraft.metadata.records import UserScramCredentialRecord
from kraft.metadata.schema import schema_of
from kraft.metadata.serde import FRAME_VERSION, decode_record, encode_record
from kraft.records import HEADER_SIZE, BatchHeader, Compression, RecordBatch, with_values

_KEY = schema_of(UserScramCredentialRecord).api_key
assert _KEY is not None  # a record type: declared with its API key
SCRAM_CREDENTIAL: int = _KEY
_CREDENTIAL_START = bytes((FRAME_VERSION, SCRAM_CREDENTIAL))  # a value's frame version and API key


def _is_credential(value: bytes | None) -> bool:
    return value is not None and len(value) > 2 and value[0] == FRAME_VERSION and value[1] == SCRAM_CREDENTIAL


def redacted_value(value: bytes) -> bytes:
    """A UserScramCredentialRecord's value with its salt, StoredKey and ServerKey empty, at
    the version it was written in."""
    record = decode_record(value)
    assert isinstance(record, UserScramCredentialRecord)  # the API key said so
    version = value[2]  # an unsigned varint: one byte for every version there is
    return encode_record(dataclasses.replace(record, salt=b"", stored_key=b"", server_key=b""), version)


def redacted(batch: RecordBatch) -> bytearray | None:
    """The batch as a client may read it, or None if it holds no credential."""
    if batch.header.is_control:
        return None
    records = batch.records()
    if not any(_is_credential(r.value) for r in records):
        return None
    return with_values(batch, [redacted_value(r.value) if r.value is not None and _is_credential(r.value)
                               else r.value for r in records])


def redactions(buffer: bytes, position: int, headers: Iterable[BatchHeader]) -> Iterator[tuple[BatchHeader, bytearray]]:
    """Each batch of `headers` (whole batches in `buffer`, which starts at `position` of its
    file) that holds credentials, with its redacted bytes. Only a compressed batch, or one
    whose bytes hold a credential value's first two bytes somewhere, is decoded: the others,
    nearly all, cost a search of the buffer at memory speed."""
    hits = []
    at = buffer.find(_CREDENTIAL_START)
    while at >= 0:
        hits.append(at)
        at = buffer.find(_CREDENTIAL_START, at + 1)
    view = memoryview(buffer)
    for header in headers:
        rel = header.position - position
        if header.is_control:
            continue
        if header.compression == Compression.NONE:
            i = bisect.bisect_left(hits, rel + HEADER_SIZE)
            if i == len(hits) or hits[i] >= rel + header.size:
                continue
        rewritten = redacted(RecordBatch(header, view[rel: rel + header.size]))
        if rewritten is not None:
            yield header, rewritten
