"""The kraft.version upgrade (Kafka 4.1, KAFKA-16538): a static quorum becomes a dynamic one.

A static quorum (controller.quorum.voters, kraft.version 0) writes no voter set: every node
has the same ids in its configuration, and nothing else about them. To write the first
VotersRecord the leader must know each voter's directory id, endpoints and kraft.version
range, so, as Kafka 4.1 does:

- A leader of a static quorum keeps, in memory (`Leader.volatile_voters`), the set it would
  write: the static ids, its own entry filled in from the start of its epoch.
- Each voter tells every new leader its own entry with UpdateRaftVoter, and the leader puts
  it in that set (Kafka's UpdateVoterHandler on kraft.version 0, in its order: no change
  pending, a high watermark in the epoch, the voter supports kraft.version 0, an endpoint on
  the controller listener, an id of the set; then answered at once). Nothing is written.
- Raising kraft.version to 1 (UpdateFeatures, `kraft features upgrade --feature
  kraft.version=1`: the controller calls `upgrade`) appends one control batch, a
  KRaftVersionRecord(1) and the first VotersRecord from that set, refused (Kafka's
  InvalidUpdateVersionException, INVALID_UPDATE_VERSION) unless every voter has told its
  entry and supports 1. From that batch on, the voters are the log's, as in a quorum
  formatted dynamic: AddRaftVoter and RemoveRaftVoter work, and a restart keeps them
  whatever controller.quorum.voters still says. If the batch is truncated away (its leader
  lost before the commit), the quorum is static again and the next leader may try again.

No downgrade: the records are in the log and its snapshots (KIP-853); the controller refuses
one before it reaches here, and `upgrade` refuses a lower version too, as LeaderState does.
"""

from kio.schema.errors import ErrorCode

from kraft.raft.membership_messages import (
    UpdateRaftVoterRequest,
    request_directory_id,
    request_endpoints,
    request_kraft_versions,
)
from kraft.raft.raft_config import RaftConfig
from kraft.raft.roles import Leader
from kraft.raft.voter_change_rules import KRAFT_VERSIONS_SUPPORTED
from kraft.raft.voters import KRAFT_VERSION_DYNAMIC, KRAFT_VERSION_STATIC, Voters, VoterSet
from kraft.records.control import ControlMessage, KRaftVersionRecord, Voter

FEATURE = "kraft.version"


class UpgradeRefused(Exception):
    """Kafka's InvalidUpdateVersionException from the Raft layer: the message is Kafka's."""


def _name(version: int) -> str:
    return f"KRAFT_VERSION_{version}"  # how Kafka's messages print a KRaftVersion


def volatile_voters(voters: Voters, config: RaftConfig) -> VoterSet | None:
    """A new leader's in-memory set: on a static quorum, the static ids with this leader's
    own entry (it needs its directory id, as Kafka's LeaderState does); else None."""
    if voters.is_dynamic or config.directory_id is None or not voters.contains(config.node_id):
        return None
    low, high = KRAFT_VERSIONS_SUPPORTED
    mine = Voter(config.node_id, config.directory_id, config.endpoints, low, high)
    return voters.latest.without(config.node_id).with_voter(mine)


def record_update(leader: Leader, request: UpdateRaftVoterRequest) -> tuple[ErrorCode, str | None]:
    """A voter's UpdateRaftVoter on a static quorum: its entry in the leader's in-memory set
    (the request's own checks, INVALID_REQUEST, are the caller's, made first)."""
    if leader.voter_change is not None or leader.progress.high_watermark is None or leader.volatile_voters is None:
        return ErrorCode.request_timed_out, None
    low, high = request_kraft_versions(request)
    if not low <= KRAFT_VERSION_STATIC <= high:
        return ErrorCode.invalid_request, None
    current = leader.volatile_voters
    if current.get(request.voter_id) is None:  # Kafka's updateVoterIgnoringDirectoryId: by id alone
        return ErrorCode.voter_not_found, None
    entry = Voter(request.voter_id, request_directory_id(request).bytes, request_endpoints(request), low, high)
    leader.volatile_voters = current.without(request.voter_id).with_voter(entry)
    return ErrorCode.none, None


def upgrade(leader: Leader, voters: Voters, version: int) -> tuple[ControlMessage, ...]:
    """The control records raising kraft.version to `version` (none: it already is), by
    LeaderState.maybeAppendUpgradedKRaftVersion's checks. Raises UpgradeRefused."""
    current = voters.kraft_version
    if version == current:
        return ()
    if version < current:
        raise UpgradeRefused(f"Invalid upgrade of {FEATURE} from {_name(current)} to {_name(version)} because the "
                             "new version is a downgrade")
    upgraded = leader.volatile_voters
    if upgraded is None or version != KRAFT_VERSION_DYNAMIC:
        raise UpgradeRefused(f"Invalid upgrade of {FEATURE} from {_name(current)} to {_name(version)}")
    if not all(v.min_kraft_version <= version <= v.max_kraft_version for v in upgraded.voters):
        raise UpgradeRefused(f"Invalid upgrade of {FEATURE} to {_name(version)} because not all of the voters "
                             "support it")
    return KRaftVersionRecord(version), upgraded.record()
