"""When the leader's queued appends go to the log: at once when everything appended before is
committed, else when the batch before them commits, at most after the linger
(controller.quorum.append.linger.ms). A lone write so has no timer between it and its
commit, and writes under load gather into one batch per replication round."""

from kraft.raft import Reply
from kraft.raft import messages as m
from kraft.records import read_batches
from tests.raft.conftest import Node, leader_node, partition, records

LINGER = 25


def fetch(offset, replica=2, wait=500):
    return m.fetch_request("c", replica, 1, offset, 1, 0, wait, 1 << 20)


def answered(node, handle):
    return [o.response for o in node.outbox() if isinstance(o, Reply) and o.handle == handle]


def batches(response):
    """The values of each data batch in a Fetch answer, batch by batch."""
    data = partition(response).records
    return [[r.value for r in b.records()] for b in read_batches(bytes(data or b"")) if not b.header.is_control]


def committed_leader():
    """Leader of epoch 1 (LeaderChange at 0) whose log is committed: voter 2 fetched to its end."""
    leader = leader_node(append_linger_ms=LINGER)
    leader.request(fetch(1))
    assert leader.core.high_watermark == leader.core.log.end_offset == 1
    return leader


def test_an_append_to_a_committed_log_goes_out_at_once_without_the_linger():
    leader = committed_leader()
    assert leader.request(fetch(1, replica=3), handle="parked") is None, "voter 3 waits for data"
    leader.core.append(records(1), leader.now)  # no tick, no time passing
    (response,) = answered(leader, "parked")
    assert batches(response) == [[b"v0"]]


def test_appends_during_a_batchs_replication_gather_and_go_when_it_commits():
    leader = committed_leader()
    leader.core.append(records(1), leader.now)  # at once: batch [v0] at offset 1
    leader.core.append(records(1, b"w"), leader.now)
    leader.core.append(records(1, b"x"), leader.now)
    assert leader.core.log.end_offset == 2, "w0 and x0 wait: v0 is not committed yet"
    assert batches(leader.request(fetch(1))) == [[b"v0"]], "voter 2 gets v0 alone"
    leader.flush()
    assert leader.core.log.end_offset == 2, "the leader's fsync alone commits nothing"
    # Voter 2 reports v0: it commits, and what gathered goes as one batch, in this very answer.
    assert batches(leader.request(fetch(2))) == [[b"w0", b"x0"]]
    assert leader.core.high_watermark == 2 and leader.core.log.end_offset == 4


def test_the_linger_still_bounds_the_wait():
    leader = committed_leader()
    leader.core.append(records(1), leader.now)
    leader.core.append(records(1, b"w"), leader.now)
    leader.advance(LINGER - 1)
    assert leader.core.log.end_offset == 2
    leader.advance(1)
    assert leader.core.log.end_offset == 3


def test_an_observers_fetch_commits_nothing_and_drains_nothing():
    leader = committed_leader()
    leader.core.append(records(1), leader.now)
    leader.core.append(records(1, b"w"), leader.now)
    assert batches(leader.request(fetch(2, replica=7, wait=0))) == [], "an observer at the end: nothing for it"
    assert leader.core.log.end_offset == 2


def test_a_single_voter_drains_at_once_when_its_disk_is_idle_and_gathers_while_it_flushes():
    node = Node(1, voters=(1,), append_linger_ms=LINGER)
    node.advance(3000)
    node.flush()
    assert node.core.is_leader and not node.core.wants_flush
    node.core.append(records(1), node.now)
    assert node.core.log.end_offset == 2 and node.core.wants_flush, "drained at once: all was committed"
    node.core.append(records(1, b"w"), node.now)
    node.core.append(records(1, b"x"), node.now)
    assert node.core.log.end_offset == 2, "gathering while the fsync runs"
    node.flush()  # the fsync commits offset 1: what gathered goes now, as one batch
    assert node.core.log.end_offset == 4
    data = read_batches(bytes(node.log.read(2, 1 << 20).data))
    assert [[r.value for r in b.records()] for b in data] == [[b"w0", b"x0"]]
