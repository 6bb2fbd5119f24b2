"""The bytes of one Fetch exchange between a follower and its leader, four of which each write
makes (issue 28 item 2): each step as kraft does it against kio's generic codec, in the same run.

- The follower writes its Fetch request (header and body): by hand (protocol/fetch_request.py)
  against kio's writer (the header entity and the body walked field by field).
- The leader writes its answer: by hand (server/apis/raft_fetch_answer.py) against the answer
  converted and encoded by kio.
- The leader reads the request and the follower reads the answer with kio's native reader
  (decode_request, decode_response, the shape check included). Against it, the floor of any
  reader written in Python: building the same entities from values already parsed, which
  alone costs more than the native reader's whole read, so those two stay kio's.

The request is the one FetchBatcher sends, v18, naming the metadata partition and one offsets
partition with their high watermarks; the answer carries 300 bytes of records for one of them.
Ratio = kio's (or the floor's) time / kraft's: above 1, kraft's step is the faster.
"""

import sys
import uuid
from collections.abc import Callable
from typing import Any

from common import best_of, goal, print_table, write_results
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v18 import request as req18
from kio.schema.fetch.v18 import response as resp18

from kraft.protocol.build import convert
from kraft.protocol.codec import FETCH, decode_request, decode_response, encode, encode_request, response_class
from kraft.protocol.framing import frame
from kraft.protocol.regions import encode_response_segments
from kraft.raft import messages as m
from kraft.server.apis import raft_fetch_answer
from kraft.server.apis.raft_versions import ABSENT
from kraft.server.runtime.fetch_batch import combine

VERSION = 18
OFFSETS = m.LogPartition("__consumer_offsets", uuid.UUID(int=7), 3)


def follower_request() -> m.FetchRequest:
    meta = m.fetch_request("bench-cluster-id-0123", 2, 3, 1000, 3, 0, 500, 1 << 20, high_watermark=990)
    offsets = m.fetch_request("bench-cluster-id-0123", 2, 3, 2000, 3, 0, 500, 1 << 20, where=OFFSETS,
                              high_watermark=1990)
    return combine([meta, offsets])


def leader_answer() -> m.FetchResponse:
    given = {"leader_id": 1, "epoch": 3, "log_start_offset": 0}
    return m.fetch_response_of([
        (m.METADATA.topic_id, [m.fetch_partition(0, ErrorCode.none, high_watermark=1000, **given)]),
        (OFFSETS.topic_id, [m.fetch_partition(3, ErrorCode.none, high_watermark=2000, records=b"r" * 300, **given)]),
    ])


def kio_request_frame(request: Any) -> bytes:
    cls = type(request)
    header = cls.__header_schema__(request_api_key=cls.__api_key__, request_api_version=cls.__version__,
                                   correlation_id=7, client_id="kraft-2")
    return frame(encode(header), encode(request))


def kio_answer_frame(answer: m.FetchResponse) -> bytes:
    converted = convert(answer, response_class(FETCH, VERSION), ABSENT[FETCH])
    return b"".join(s for s in encode_response_segments(7, converted) if isinstance(s, bytes))


def request_floor(r: m.FetchRequest) -> Callable[[], object]:
    """Builds the request's entities from values already parsed: what any Python reader must at least do."""
    top = (r.cluster_id, r.replica_state.replica_id, r.replica_state.replica_epoch, r.max_wait, r.min_bytes,
           r.max_bytes, r.isolation_level, r.session_id, r.session_epoch, r.rack_id)
    topics = [(t.topic_id, [(p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                             p.log_start_offset, p.partition_max_bytes, p.replica_directory_id, p.high_watermark)
                            for p in t.partitions]) for t in r.topics]

    def build() -> object:
        cluster, replica, replica_epoch, wait, least, most, isolation, session, session_epoch, rack = top
        return req18.FetchRequest(
            cluster_id=cluster, replica_state=req18.ReplicaState(replica_id=replica, replica_epoch=replica_epoch),
            max_wait=wait, min_bytes=least, max_bytes=most, isolation_level=isolation, session_id=session,
            session_epoch=session_epoch, forgotten_topics_data=(), rack_id=rack,
            topics=tuple(req18.FetchTopic(topic_id=topic_id, partitions=tuple(
                req18.FetchPartition(partition=a, current_leader_epoch=b, fetch_offset=c, last_fetched_epoch=d,
                                     log_start_offset=e, partition_max_bytes=f, replica_directory_id=g,
                                     high_watermark=h) for a, b, c, d, e, f, g, h in parts))
                for topic_id, parts in topics))
    return build


def answer_floor(a: m.FetchResponse) -> Callable[[], object]:
    """Builds the answer's entities from values already parsed (see request_floor)."""
    topics = [(t.topic_id, [(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                             p.log_start_offset, p.preferred_read_replica, p.records, p.current_leader.leader_id,
                             p.current_leader.leader_epoch) for p in t.partitions]) for t in a.responses]

    def build() -> object:
        return resp18.FetchResponse(
            throttle_time=a.throttle_time, error_code=a.error_code, session_id=a.session_id, node_endpoints=(),
            responses=tuple(resp18.FetchableTopicResponse(topic_id=topic_id, partitions=tuple(
                resp18.PartitionData(partition_index=i, error_code=e, high_watermark=hw, last_stable_offset=lso,
                                     log_start_offset=lo, aborted_transactions=None, preferred_read_replica=pr,
                                     records=rec, diverging_epoch=resp18.EpochEndOffset(),
                                     current_leader=resp18.LeaderIdAndEpoch(leader_id=lid, leader_epoch=le),
                                     snapshot_id=resp18.SnapshotId())
                for i, e, hw, lso, lo, pr, rec, lid, le in parts)) for topic_id, parts in topics))
    return build


def paired(ours: Callable[[], object], base: Callable[[], object], rounds: int = 9) -> tuple[float, float]:
    """Seconds per call of each, the best of `rounds` rounds timing both back to back."""
    t_ours, t_base = best_of(ours, repeat=1), best_of(base, repeat=1)
    for _ in range(rounds - 1):
        t_ours, t_base = min(t_ours, best_of(ours, repeat=1)), min(t_base, best_of(base, repeat=1))
    return t_ours, t_base


def main() -> int:
    request, answer = follower_request(), leader_answer()
    request_frame = encode_request(request, 7, "kraft-2")
    assert request_frame == kio_request_frame(request)
    answer_segments = encode_response_segments(7, raft_fetch_answer.encode(answer, VERSION))
    answer_frame = b"".join(s for s in answer_segments if isinstance(s, bytes))
    assert answer_frame == kio_answer_frame(answer)
    request_body, answer_body = memoryview(request_frame)[4:], memoryview(answer_frame)[4:]
    answer_cls = response_class(FETCH, VERSION)
    decoded_answer = decode_response(answer_body, answer_cls)[1]
    assert decode_request(request_body)[1] == request == request_floor(request)()
    assert decoded_answer == answer_floor(decoded_answer)()
    steps = [
        ("follower writes its Fetch", "by hand", "kio", lambda: encode_request(request, 7, "kraft-2"),
         lambda: kio_request_frame(request)),
        ("leader writes the answer", "by hand", "kio", lambda: raft_fetch_answer.encode(answer, VERSION),
         lambda: kio_answer_frame(answer)),
        ("leader reads the Fetch", "kio native", "Python floor", lambda: decode_request(request_body),
         request_floor(request)),
        ("follower reads the answer", "kio native", "Python floor", lambda: decode_response(answer_body, answer_cls),
         answer_floor(decoded_answer)),
    ]
    rows = []
    for step, kraft_way, other_way, ours, base in steps:
        t_ours, t_base = paired(ours, base)
        rows.append({"step": step, "kraft": kraft_way, "kraft_us": t_ours * 1e6, "against": other_way,
                     "against_us": t_base * 1e6, "ratio": t_base / t_ours})
    print(f"one Fetch exchange's bytes, v{VERSION}, {len(request_frame)}-byte request, "
          f"{len(answer_frame)}-byte answer\n")
    print_table(rows, ["step", "kraft", "kraft_us", "against", "against_us", "ratio"])
    kraft_total = sum(r["kraft_us"] for r in rows)
    kio_total = rows[0]["against_us"] + rows[1]["against_us"] + rows[2]["kraft_us"] + rows[3]["kraft_us"]
    request_saved = rows[0]["against_us"] - rows[0]["kraft_us"]
    print(f"\nratio = the other way's time / kraft's. One exchange: {kraft_total:.1f} us, all through kio "
          f"{kio_total:.1f} us.\nThe request written by hand saves {request_saved:.0f} us a Fetch, "
          f"{4 * request_saved:.0f} us a write over the three nodes (each follower sends two Fetches a write).")
    goals = [goal(f"{r['step']} ({r['kraft']})", r["kraft_us"], "us", peer=r["against"], peer_value=r["against_us"])
             for r in rows]
    print(f"results: {write_results('fetch_codec', rows, goals, exchange_us=kraft_total, kio_exchange_us=kio_total)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
