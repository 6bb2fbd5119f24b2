"""What the shape check costs: decode_request with it against the same decoding without it
(kio's native reader on the header and the body, as decode_request did before issue 14).

Requests: a follower's Fetch v13 (one partition; every peer sends one per fetch), a
Metadata v12 naming ten topics, and a CreateTopics v7 of 100 topics with a config each.
Target (issue 14): the check adds well under 1 us to the Fetch (it decoded in about
2.2 us natively).
"""

import sys
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from common import all_met, best_of, goal, print_goals, print_table, write_results
from kio.serial import entity_reader

from kraft.protocol import MalformedFrameError
from kraft.protocol.build import build_request
from kraft.protocol.codec import decode_request, encode_request, peek_api, request_class

TARGET_ADDED_US = 1.0


def requests() -> list[tuple[str, bytes]]:
    fetch = build_request(
        1,
        13,
        {
            "replica_id": 2,
            "max_wait": timedelta(milliseconds=500),
            "min_bytes": 1,
            "max_bytes": 1 << 23,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "rack_id": "",
            "topics": [
                {
                    "topic_id": uuid.UUID(int=1),
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": 3,
                            "fetch_offset": 12345,
                            "last_fetched_epoch": 3,
                            "log_start_offset": 0,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
        },
    )
    metadata = build_request(
        3,
        12,
        {
            "topics": [{"topic_id": uuid.UUID(int=0), "name": f"topic-{i}"} for i in range(10)],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    create = build_request(
        19,
        7,
        {
            "topics": [
                {
                    "name": f"topic-{i}",
                    "num_partitions": 3,
                    "replication_factor": 3,
                    "assignments": [],
                    "configs": [{"name": "cleanup.policy", "value": "compact"}],
                }
                for i in range(100)
            ],
            "timeout": timedelta(seconds=30),
            "validate_only": False,
        },
    )
    return [
        (name, encode_request(r, correlation_id=7, client_id="replica-2")[4:])
        for name, r in (
            ("Fetch v13, 1 partition", fetch),
            ("Metadata v12, 10 topics", metadata),
            ("CreateTopics v7, 100 topics", create),
        )
    ]


def unchecked(frame: bytes) -> tuple[Any, Any]:
    """decode_request as it was before the shape check: kio's native reader on the header
    and on the body, its errors turned into MalformedFrameError."""
    cls = request_class(*peek_api(frame))
    header, pos = _native(cls.__header_schema__, frame, 0)
    request, _ = _native(cls, frame, pos)
    return header, request


def _native(cls: type, buf: bytes, pos: int) -> tuple[Any, int]:
    try:
        value, size = entity_reader(cls)(buf, pos)
    except Exception as e:  # noqa: BLE001 - kio raises a mix of ValueError, DecodeError...
        raise MalformedFrameError(f"{cls.__name__} does not parse: {e}") from None
    return value, pos + size


def paired_best(
    ours: Callable[[], object], base: Callable[[], object], rounds: int = 15
) -> tuple[float, float]:
    """Seconds per call of each, the best of `rounds` rounds that time both back to back, so
    that a busy moment of the machine costs both alike."""
    t_ours, t_base = best_of(ours, repeat=1), best_of(base, repeat=1)
    for _ in range(rounds - 1):
        t_ours, t_base = min(t_ours, best_of(ours, repeat=1)), min(t_base, best_of(base, repeat=1))
    return t_ours, t_base


def main() -> int:
    rows: list[dict[str, Any]] = []
    for name, frame in requests():
        assert decode_request(frame)  # and it parses
        t_ours, t_base = paired_best(
            lambda f=frame: decode_request(f), lambda f=frame: unchecked(f)
        )
        rows.append(
            {
                "request": name,
                "bytes": len(frame),
                "checked_us": t_ours * 1e6,
                "unchecked_us": t_base * 1e6,
                "added_us": (t_ours - t_base) * 1e6,
                "ratio": t_base / t_ours,
            }
        )
    print("decode_request with the shape check against kio's reader alone\n")
    print_table(rows, ["request", "bytes", "checked_us", "unchecked_us", "added_us", "ratio"])
    print("\nratio = unchecked time / checked time (1 would be free).")
    fetch = rows[0]
    goals = [goal(f"decode a {fetch['request']}", fetch["checked_us"], "us", goal=f"< the peer + {TARGET_ADDED_US} us",
                  met=fetch["added_us"] < TARGET_ADDED_US, peer="kio's reader alone", peer_value=fetch["unchecked_us"])]
    print_goals(goals)
    print(f"results: {write_results('protocol', rows, goals)}")
    return 0 if all_met(goals) else 1


if __name__ == "__main__":
    sys.exit(main())
