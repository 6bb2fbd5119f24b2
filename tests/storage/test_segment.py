"""A segment finds the batch holding any offset: through its sparse index and a header walk, or
for the batches since the last index entry (the ones followers and the commit delivery read)
from memory, and both ways give the same batch, after appends, truncations and a reopen."""

from kraft.records import SimpleRecord, build_batch, iter_batches
from kraft.storage.segment import Segment, Span


def appended(segment: Segment, base_offset: int, count: int, value: bytes = b"v") -> int:
    data = build_batch([SimpleRecord(None, value * 30)] * count, base_offset=base_offset)
    segment.append(data, list(iter_batches(data)))
    return base_offset + count


def walked(segment: Segment, offset: int) -> Span | None:
    """The batch holding `offset`, by reading every header from the start."""
    data = open(segment.path, "rb").read()[: segment.size]
    for h in iter_batches(data):
        if h.base_offset <= offset < h.next_offset:
            return Span(h.position, h.size, h.base_offset, h.next_offset)
    return None


def test_every_offset_is_found_where_the_headers_say(tmp_path):
    segment = Segment(tmp_path, 100, created_ms=0, index_interval_bytes=512)
    offset = 100
    for count in [1, 3, 1, 2, 5, 1] * 8:
        offset = appended(segment, offset, count)
    assert len(segment._index_offsets) > 3, "several index entries: both lookups are used"
    for o in range(95, offset + 3):
        assert segment.locate(o) == walked(segment, o), o
    # Cut inside the batches since the last index entry, then before it; append again each time.
    for cut in (offset - 4, 130):
        segment.truncate(cut)
        for o in range(95, segment.next_offset + 3):
            assert segment.locate(o) == walked(segment, o), (cut, o)
        end = segment.next_offset
        for count in (2, 1, 4):
            end = appended(segment, end, count, b"w")
        for o in range(95, end + 3):
            assert segment.locate(o) == walked(segment, o), (cut, o)
    segment.close()
