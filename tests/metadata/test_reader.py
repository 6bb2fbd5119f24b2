"""The compiled metadata record reader (kraft.metadata._fields) against an independent reading.

Every value decodes the same through the C reader and `wire.reference_decode`, a plain
Python walk of the same declarations: random records of every type and version, written
with every variation Kafka's format allows; and the same values corrupted at random, where
both must refuse alike (and the C reader only with MetadataRecordError). Decoding leaks
nothing, on success or failure, and a plan refuses a class it could not build safely.
"""

import dataclasses
import gc
import random
import struct
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.metadata import MetadataRecordError, _fields, decode_record, encode_record
from kraft.metadata.records import RECORD_TYPES, ConfigRecord
from kraft.metadata.schema import INT32, STRING, ArrayOf, message, wire
from tests.metadata.wire import Bad, any_record, random_record, reference_decode, shape, variant, versions


@given(any_record(), st.randoms(use_true_random=False))
@settings(max_examples=600)
def test_every_variant_decodes_to_the_record_both_ways(case, rng):
    version, record = case
    for value in (encode_record(record, version), variant(record, version, rng)):
        assert shape(decode_record(value)) == shape(record)
        assert shape(reference_decode(value)) == shape(record)


def _outcome(decode, value):
    try:
        return shape(decode(value))
    except (MetadataRecordError, Bad):
        return "refused"


def _corrupt(value: bytes, rng: random.Random) -> bytes:
    data = bytearray(value)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(6)
        at = rng.randrange(len(data) + 1)
        if kind == 0 and at < len(data):
            data[at] ^= 1 << rng.randrange(8)
        elif kind == 1 and at < len(data):
            data[at] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif kind == 2:
            data[at:at] = rng.randbytes(rng.randint(1, 4))
        elif kind == 3:
            del data[at : at + rng.randint(1, 4)]
        elif kind == 4:
            del data[at:]
        else:
            data += rng.randbytes(rng.randint(1, 3))
    return bytes(data)


@pytest.fixture(scope="module")
def samples() -> list[bytes]:
    """Valid values of every type and version, half as kraft writes them, half as variants."""
    rng = random.Random(482)
    cases = [(cls, v) for cls in RECORD_TYPES for v in versions(cls)]
    out = []
    for i in range(300):
        cls, version = cases[i % len(cases)]
        record = random_record(cls, version, rng)
        out.append(variant(record, version, rng) if i % 2 else encode_record(record, version))
    return out


def test_corrupted_values_are_refused_alike_and_only_with_metadata_record_error(samples):
    rng = random.Random(746)
    outcomes = {"refused": 0, "decoded": 0}
    for _ in range(30_000):
        value = _corrupt(rng.choice(samples), rng)
        ours = _outcome(decode_record, value)  # any other exception fails the test
        assert ours == _outcome(reference_decode, value), value.hex()
        outcomes["refused" if ours == "refused" else "decoded"] += 1
    assert min(outcomes.values()) > 1000, outcomes  # both paths were exercised


@given(st.binary(max_size=300), st.sampled_from([cls for cls in RECORD_TYPES]))
@settings(max_examples=1000)
def test_random_bodies_behind_a_valid_header_are_refused_alike(body, cls):
    value = bytes([1, cls.__schema__.api_key, cls.__schema__.versions[1]]) + body
    assert _outcome(decode_record, value) == _outcome(reference_decode, value)


def test_bytes_like_values_decode_as_bytes_do(samples):
    for value in samples[:50]:
        expected = shape(decode_record(value))
        assert shape(decode_record(bytearray(value))) == expected
        assert shape(decode_record(memoryview(b"xx" + value)[2:])) == expected
    with pytest.raises(MetadataRecordError, match="without a value"):
        decode_record(None)
    with pytest.raises(TypeError):
        decode_record(7)


def test_decoding_leaks_nothing_on_success_or_failure(samples):
    rng = random.Random(1)
    values = samples + [_corrupt(v, rng) for v in samples for _ in range(3)]
    failures = 0

    def decode_all() -> None:
        nonlocal failures
        for value in values:
            try:
                decode_record(value)
            except MetadataRecordError:
                failures += 1

    decode_all()  # warm up: caches, interned strings
    gc.collect()
    refcounts = [sys.getrefcount(cls) for cls in RECORD_TYPES]
    blocks = sys.getallocatedblocks()
    for _ in range(100):
        decode_all()
    gc.collect()
    grown = sys.getallocatedblocks() - blocks
    assert failures > 100 * len(samples)  # error paths ran as often as successful ones
    assert grown < 1000, f"{grown} memory blocks more after {101 * len(values)} decodes"
    assert [sys.getrefcount(cls) for cls in RECORD_TYPES] == refcounts


def test_a_decoded_record_is_the_record_its_class_would_build():
    record = decode_record(encode_record(ConfigRecord(resource_type=2, resource_name="t", name="k", value="v")))
    assert type(record) is ConfigRecord and record == ConfigRecord(2, "t", "k", "v")
    assert hash(record) == hash(ConfigRecord(2, "t", "k", "v"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.value = "w"


def test_a_plan_refuses_a_class_it_cannot_build_slot_by_slot():
    @message(api_key=100)
    class Checked:
        n: int = wire(INT32)

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="__post_init__"):
        Checked.__schema__.plan(0)

    @message(api_key=101)
    class Two:
        a: int = wire(INT32)
        b: str = wire(STRING)

    a, b = Two.__dict__["a"], Two.__dict__["b"]
    with pytest.raises(ValueError, match="fills a slot twice"):
        _fields.Plan(Two, [(a, "int32", False), (a, "int32", False)], [], [])
    with pytest.raises(ValueError, match="has 2 slots, the plan fills 1"):
        _fields.Plan(Two, [(a, "int32", False)], [], [])
    with pytest.raises(TypeError, match="not a writable object slot"):
        _fields.Plan(Two, [(a, "int32", False), (ConfigRecord.__dict__["name"], "string", False)], [], [])
    with pytest.raises(ValueError, match="cannot be read"):
        _fields.Plan(Two, [(a, "int32", True), (b, "string", False)], [], [])  # a nullable int
    assert isinstance(_fields.Plan(Two, [(a, "int32", False), (b, "string", False)], [], []), _fields.Plan)


def test_a_tagged_value_replaces_its_default_and_an_earlier_value_without_leaking_either():
    default = (1_000_001, 1_000_002)  # owned by this test: its refcount counts only this test's references

    @message(api_key=102)
    class Tagged:
        n: int = wire(INT32)
        ids: tuple = wire(ArrayOf(INT32), tag=3, default=default)

    decoder = _fields.Decoder(MetadataRecordError, 1, [(102, "Tagged", 0, 0, (Tagged.__schema__.plan(0),))])

    def tag_3(*ids: int) -> bytes:  # tag 3, its size, a compact array of int32s
        body = bytes([len(ids) + 1]) + struct.pack(f">{len(ids)}i", *ids)
        return bytes([3, len(body)]) + body

    value = bytes([1, 102, 0]) + struct.pack(">i", 1) + b"\x02" + tag_3(5_000_000) + tag_3(7_000_000, 8_000_000)
    assert decoder.decode(bytes([1, 102, 0]) + bytes(4) + b"\x00").ids is default
    refs = sys.getrefcount(default)
    gc.collect()
    blocks = sys.getallocatedblocks()
    for _ in range(20_000):
        assert decoder.decode(value) == Tagged(n=1, ids=(7_000_000, 8_000_000))
    gc.collect()
    assert sys.getallocatedblocks() - blocks < 200
    assert sys.getrefcount(default) == refs
