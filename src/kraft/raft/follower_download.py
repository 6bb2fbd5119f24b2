"""A follower's snapshot download (KIP-630), as the core drives it: the state it owns.

snapshot_fetch.py holds the mechanics (the download's writer, its checks of each answer);
this module acts on the role object that holds the download, `Follower.download`: started
when the leader's Fetch answer names a snapshot (installed at once when it is held already),
a FetchSnapshot for the next chunk sent instead of a Fetch while it runs, each answer taken
or refused, dropped when a chunk is wrong (the next Fetch starts over) or the replica leaves
the role. A complete download is installed by the core, which owns the log's restart and the
high watermark. Serving FetchSnapshot is the leader's, a request like the others in the core.
"""

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from kraft.raft import messages as m
from kraft.raft.outbox import Outbox
from kraft.raft.quorum_state import QuorumState
from kraft.raft.raft_config import RaftConfig
from kraft.raft.roles import Follower
from kraft.raft.snapshot_fetch import DownloadFailed, SnapshotDownload
from kraft.storage import SnapshotId, SnapshotStore

# What a follower asks for in one FetchSnapshot: Kafka's KRaft client asks for its batch
# limit (KafkaRaftClient.MAX_FETCH_SIZE_BYTES), not replica.fetch.response.max.bytes, which
# is the brokers' replica fetcher's (and caps what the leader serves, snapshot_fetch.py).
FETCH_SNAPSHOT_MAX_BYTES = 8 * 1024 * 1024


class FollowerDownload:
    def __init__(self, config: RaftConfig, quorum: QuorumState, outbox: Outbox, snapshots: SnapshotStore,
                 observe: Callable[[int], None], install: Callable[[SnapshotId, str], None]) -> None:
        self.config = config
        self.node_id = config.node_id
        self.quorum = quorum
        self.outbox = outbox
        self.snapshots = snapshots
        self.observe = observe  # the core's: learn of snapshots frozen since the last step
        self.install = install  # the core's: restart the log at a held snapshot and load it

    def start(self, follower: Follower, sid: SnapshotId) -> None:
        """The leader says: take snapshot `sid`. Log fetching pauses until it is loaded."""
        if sid in self.snapshots.list():
            self.install(sid, "already held locally")
            return
        if follower.download is not None:
            follower.download.abort("a new snapshot was named")
        follower.download = SnapshotDownload.start(self.snapshots, sid, self.node_id, self.quorum.leader_id)

    def ask_for_chunk(self, follower: Follower, leader_id: int, now: int) -> bool:
        """While a download runs, the follower asks for its next chunk instead of fetching
        (True: asked)."""
        if follower.download is None:
            return False
        request = follower.download.request(self.config.cluster_id, self.quorum.epoch, FETCH_SNAPSHOT_MAX_BYTES,
                                            self.config.partition)
        self.outbox.send(leader_id, request, now)
        return True

    def abandon(self, old: Follower) -> None:
        """The replica stopped following: its download, if any, is dropped."""
        if old.download is not None:
            old.download.abort("the replica changed state")

    def on_response(self, source: int, response: m.FetchSnapshotResponse, now: int) -> None:
        p = m.partition_of(response, self.config.partition)
        if response.error_code != ErrorCode.none or p is None:
            self.outbox.back_off(source, now)
            return
        if self.quorum.learn_leader(p.current_leader.leader_id, p.current_leader.leader_epoch, now):
            return
        follower = self.quorum.state
        if not isinstance(follower, Follower) or source != self.quorum.leader_id or follower.download is None:
            return
        download = follower.download
        try:
            if not download.check_answer(p):
                self.outbox.back_off(source, now)
                return
            follower.fetch_deadline = now + self.config.fetch_timeout_ms
            complete = download.accept(p)
        except DownloadFailed as e:
            download.abort(str(e))
            follower.download = None
            return
        if complete:
            follower.download = None
            self.observe(now)
            self.install(download.snapshot_id, "fetched from the leader")
