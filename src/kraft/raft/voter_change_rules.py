"""Changing the voters at the leader: KIP-853's AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter.

Kafka's checks, in Kafka's order: the cluster id; this replica leads; the request itself
(`invalid`, INVALID_REQUEST: a directory id that is missing or zero, no endpoint on the
controller listener, an UpdateRaftVoter's kraft.version range upside down); no change is
waiting (REQUEST_TIMED_OUT: one at a time); a high watermark in this epoch (REQUEST_TIMED_OUT:
the previous epochs' changes are not fenced yet); kraft.version 1 (UNSUPPORTED_VERSION: a static
quorum cannot change); the latest voter set committed (REQUEST_TIMED_OUT); then the API's own:
an added voter must be new (DUPLICATE_VOTER) and caught up as an observer within a fetch
timeout (REQUEST_TIMED_OUT, "lagging"); a removed one must be in the set with that directory id,
and the set must keep a voter (VOTER_NOT_FOUND either way, as Kafka's removeVoter finds no set).

Kafka asks the new voter for ApiVersions to learn its kraft.version range; kraft takes the
range every kraft node has (0 to 1), and the new voter's fetching, which the caught-up check
already requires, shows it is there.

The change is one VotersRecord appended at once; the answer waits for it to commit, or for
the request's timeout (REQUEST_TIMED_OUT; the record stays and may still commit), except an
AddRaftVoter with AckWhenCommitted false (v1, KIP-1186: a controller adding itself), answered
once appended: the change still waits for its commit before the next one. A leader that
removed itself resigns once the removal is committed, as Kafka's does.

UpdateRaftVoter is a voter telling its leader its endpoints and kraft.version range, when
they differ from the voter set's (a controller moved, or was formatted with other listeners):
the same one-at-a-time checks, then the voter's entry replaced; answered at once, as Kafka does.
"""

from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kraft.raft.leader import LeaderState
from kraft.raft.membership_messages import (
    AddRaftVoterRequest,
    MembershipRequest,
    MembershipResponse,
    UpdateRaftVoterRequest,
    request_directory_id,
    request_endpoints,
    request_kraft_versions,
    response_for,
)
from kraft.raft.voters import KRAFT_VERSION_DYNAMIC, NO_DIRECTORY, Voters, VoterSet
from kraft.records.control import Voter, VoterEndpoint

KRAFT_VERSIONS_SUPPORTED = (0, KRAFT_VERSION_DYNAMIC)


@dataclass
class PendingChange:
    """A voter change appended at `offset`, waiting for the commit; its request answered then,
    unless `acknowledged` already (AckWhenCommitted false)."""

    request: MembershipRequest
    handle: Any
    offset: int
    deadline: int
    acknowledged: bool = False

    def answer(self, error: ErrorCode, message: str | None = None) -> MembershipResponse:
        return response_for(self.request, error, message)


def caught_up(progress: LeaderState, node_id: int, fetch_timeout_ms: int, now: int) -> bool:
    """Whether `node_id` may be added: an observer of this leader that reached its log end
    within a fetch timeout (Kafka's rule; the `__consumer_offsets` voters' mirror asks it too,
    to add a ready voter before waiting on one that is not)."""
    state = progress.observer_progress.get(node_id)
    return state is not None and state.last_caught_up_ms >= now - fetch_timeout_ms


def invalid(request: MembershipRequest, controller_listener: str | None) -> tuple[ErrorCode, str] | None:
    """What makes the request itself wrong, whatever the quorum's state (Kafka checks it
    before anything else): INVALID_REQUEST. `controller_listener`: the listener the voters
    are reached on (None: not known here, not checked)."""
    if isinstance(request, AddRaftVoterRequest | UpdateRaftVoterRequest) and controller_listener is not None:
        if not any(listener.name == controller_listener for listener in request.listeners):
            return ErrorCode.invalid_request, (
                f"node {request.voter_id} gave no endpoint for the controller listener {controller_listener}")
    if isinstance(request, UpdateRaftVoterRequest):
        low, high = request_kraft_versions(request)
        if not 0 <= low <= high:
            return ErrorCode.invalid_request, f"node {request.voter_id} gave kraft.version range {low}-{high}"
    if request_directory_id(request).bytes == NO_DIRECTORY:
        return ErrorCode.invalid_request, f"node {request.voter_id} gave no directory id"
    return None


def refusal(
    request: MembershipRequest,
    voters: Voters,
    progress: LeaderState,
    pending: PendingChange | None,
    fetch_timeout_ms: int,
    now: int,
) -> tuple[ErrorCode, str] | None:
    """Why the leader cannot make this change now (None: it can). The cluster id, the
    leadership and `invalid` are the caller's to check first. The high watermark is the
    leader's own (in its epoch), never the one it kept from following: until it has committed
    in its epoch, a change of an earlier leader's that it has not seen committed may still be
    in force."""
    if pending is not None:
        return ErrorCode.request_timed_out, "waiting for the previous voter change to commit"
    high_watermark = progress.high_watermark
    if high_watermark is None:
        return ErrorCode.request_timed_out, "the leader has no high watermark in its epoch yet"
    if voters.kraft_version < KRAFT_VERSION_DYNAMIC:
        return ErrorCode.unsupported_version, (
            f"kraft.version is {voters.kraft_version}: the voters are controller.quorum.voters, which cannot "
            "change (format with --standalone or --initial-controllers for a dynamic quorum)")
    if voters.latest_offset >= high_watermark:
        return ErrorCode.request_timed_out, f"the voter change at offset {voters.latest_offset} is not committed yet"
    latest = voters.latest
    if isinstance(request, AddRaftVoterRequest):
        if latest.get(request.voter_id) is not None:
            return ErrorCode.duplicate_voter, f"node {request.voter_id} is already a voter in {list(latest.ids)}"
        if not request.listeners:
            return ErrorCode.invalid_request, f"no endpoints given for node {request.voter_id}"
        if not caught_up(progress, request.voter_id, fetch_timeout_ms, now):
            return ErrorCode.request_timed_out, (
                f"node {request.voter_id} is lagging behind: it must fetch as an observer and catch up first")
        return None
    voter = latest.get(request.voter_id)
    if voter is None or voter.directory_id != request_directory_id(request).bytes:
        return ErrorCode.voter_not_found, (
            f"no voter {request.voter_id} with directory id {request.voter_directory_id} in {list(latest.ids)}")
    if isinstance(request, UpdateRaftVoterRequest):
        low, high = request_kraft_versions(request)
        if not request.listeners or not low <= voters.kraft_version <= high:
            return ErrorCode.invalid_request, (
                f"node {request.voter_id} must give its endpoints and support kraft.version {voters.kraft_version}")
        return None
    if len(latest.voters) == 1:
        return ErrorCode.voter_not_found, f"node {request.voter_id} is the only voter: the set cannot be empty"
    return None


def outdated_entry(voters: Voters, node_id: int, directory_id: bytes | None,
                   endpoints: tuple[VoterEndpoint, ...]) -> Voter | None:
    """This replica's entry in a dynamic quorum's latest voter set, if it names other endpoints
    than the replica is reached at (it moved, or its entry was written with others) or another
    kraft.version range than this build supports: what a voter asks its leader to rewrite
    (UpdateRaftVoter) and a new leader rewrites itself, as Kafka's voterNodeNeedsUpdate has it.
    None if it is no voter by this directory id, or its endpoints are not known."""
    if not endpoints or directory_id is None or voters.kraft_version < KRAFT_VERSION_DYNAMIC:
        return None
    mine = voters.latest.get(node_id)
    if mine is None or mine.directory_id != directory_id:
        return None
    if mine.endpoints == endpoints and (mine.min_kraft_version, mine.max_kraft_version) == KRAFT_VERSIONS_SUPPORTED:
        return None
    return mine


def changed_set(request: MembershipRequest, latest: VoterSet) -> VoterSet:
    """The voter set after the change `refusal` allowed."""
    if isinstance(request, AddRaftVoterRequest):
        low, high = KRAFT_VERSIONS_SUPPORTED
        return latest.with_voter(Voter(request.voter_id, request_directory_id(request).bytes,
                                       request_endpoints(request), low, high))
    if isinstance(request, UpdateRaftVoterRequest):
        low, high = request_kraft_versions(request)
        return latest.without(request.voter_id).with_voter(Voter(
            request.voter_id, request_directory_id(request).bytes, request_endpoints(request), low, high))
    return latest.without(request.voter_id)

