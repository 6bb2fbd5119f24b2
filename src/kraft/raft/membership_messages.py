"""Builders and readers for KIP-853's membership RPCs, as kio's classes: AddRaftVoter (API
key 80) v1 (KIP-1186: AckWhenCommitted), RemoveRaftVoter (81) and UpdateRaftVoter (82) v0.

One module for both ends: `kraft metadata-quorum add-controller` / `remove-controller`
build the requests and read the answers; the leader reads the requests and builds the
answers. Unlike the other KRaft RPCs these name no partition: the voter set is the whole
cluster's.

Directory ids are `uuid.UUID` here, as kio has them (None stands for Kafka's zero UUID,
"no directory id", as kio reads it); endpoints are `records.control.VoterEndpoint`, the
VotersRecord's own, so a request's listeners become a voter's endpoints unchanged.
"""

import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Final, cast

from kio.schema.add_raft_voter.v1 import request as add_req
from kio.schema.add_raft_voter.v1 import response as add_resp
from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0 import request as remove_req
from kio.schema.remove_raft_voter.v0 import response as remove_resp
from kio.schema.types import BrokerId
from kio.schema.update_raft_voter.v0 import request as update_req
from kio.schema.update_raft_voter.v0 import response as update_resp
from kio.static.primitive import i16, i32, i32Timedelta, u16

from kraft.records.control import VoterEndpoint

ADD_RAFT_VOTER: Final = 80
REMOVE_RAFT_VOTER: Final = 81
UPDATE_RAFT_VOTER: Final = 82
NO_DIRECTORY: Final = uuid.UUID(int=0)

AddRaftVoterRequest = add_req.AddRaftVoterRequest
AddRaftVoterResponse = add_resp.AddRaftVoterResponse
RemoveRaftVoterRequest = remove_req.RemoveRaftVoterRequest
RemoveRaftVoterResponse = remove_resp.RemoveRaftVoterResponse
UpdateRaftVoterRequest = update_req.UpdateRaftVoterRequest
UpdateRaftVoterResponse = update_resp.UpdateRaftVoterResponse
MembershipRequest = AddRaftVoterRequest | RemoveRaftVoterRequest | UpdateRaftVoterRequest
MembershipResponse = AddRaftVoterResponse | RemoveRaftVoterResponse | UpdateRaftVoterResponse

# The field types are phantom types (raft/messages.py says why these cast rather than convert).
_NO_THROTTLE: Final = cast(i32Timedelta, timedelta(0))


# ---------------------------------------------------------------- requests


def add_raft_voter_request(cluster_id: str | None, timeout_ms: int, voter_id: int, directory_id: uuid.UUID,
                           endpoints: Iterable[VoterEndpoint], ack_when_committed: bool = True) -> AddRaftVoterRequest:
    """Make `voter_id`, whose log directory is `directory_id`, a voter, reachable at
    `endpoints` (its controller listeners). The leader answers within `timeout_ms`: once the
    new set is committed, or REQUEST_TIMED_OUT; with `ack_when_committed` False (KIP-1186, a
    controller adding itself), once it is appended: the new voter, which the commit may
    need, must not wait for that answer to fetch again. `cluster_id` None: not checked
    (Kafka's admin client sends none)."""
    return AddRaftVoterRequest(
        cluster_id=cluster_id,
        timeout=cast(i32Timedelta, timedelta(milliseconds=timeout_ms)),
        voter_id=cast(i32, voter_id),
        voter_directory_id=directory_id,
        listeners=tuple(add_req.Listener(name=e.name, host=e.host, port=cast(u16, e.port)) for e in endpoints),
        ack_when_committed=ack_when_committed,
    )


def remove_raft_voter_request(cluster_id: str | None, voter_id: int,
                              directory_id: uuid.UUID) -> RemoveRaftVoterRequest:
    """Remove the voter (`voter_id`, `directory_id`): both must match the voter set's entry."""
    return RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=cast(i32, voter_id),
                                  voter_directory_id=directory_id)


def update_raft_voter_request(cluster_id: str | None, current_leader_epoch: int, voter_id: int,
                              directory_id: uuid.UUID, endpoints: Iterable[VoterEndpoint],
                              kraft_versions: tuple[int, int]) -> UpdateRaftVoterRequest:
    """A voter tells the leader of `current_leader_epoch` its current endpoints and the
    kraft.version range (min, max) it supports, so the VotersRecord follows its upgrades."""
    low, high = kraft_versions
    return UpdateRaftVoterRequest(
        cluster_id=cluster_id,
        current_leader_epoch=cast(i32, current_leader_epoch),
        voter_id=cast(i32, voter_id),
        voter_directory_id=directory_id,
        listeners=tuple(update_req.Listener(name=e.name, host=e.host, port=cast(u16, e.port)) for e in endpoints),
        k_raft_version_feature=update_req.KRaftVersionFeature(min_supported_version=cast(i16, low),
                                                             max_supported_version=cast(i16, high)),
    )


# ---------------------------------------------------------------- reading requests


def request_endpoints(request: AddRaftVoterRequest | UpdateRaftVoterRequest) -> tuple[VoterEndpoint, ...]:
    """The request's listeners as VotersRecord endpoints, in the request's order."""
    return tuple(VoterEndpoint(listener.name, listener.host, int(listener.port)) for listener in request.listeners)


def request_directory_id(request: MembershipRequest) -> uuid.UUID:
    """The request's directory id, Kafka's zero UUID where kio reads it as None."""
    return request.voter_directory_id or NO_DIRECTORY


def request_kraft_versions(request: UpdateRaftVoterRequest) -> tuple[int, int]:
    feature = request.k_raft_version_feature
    return int(feature.min_supported_version), int(feature.max_supported_version)


# ---------------------------------------------------------------- responses


def add_raft_voter_response(error: ErrorCode, message: str | None = None) -> AddRaftVoterResponse:
    return AddRaftVoterResponse(throttle_time=_NO_THROTTLE, error_code=error, error_message=message)


def remove_raft_voter_response(error: ErrorCode, message: str | None = None) -> RemoveRaftVoterResponse:
    return RemoveRaftVoterResponse(throttle_time=_NO_THROTTLE, error_code=error, error_message=message)


def update_raft_voter_response(error: ErrorCode, *, leader_id: int = -1, leader_epoch: int = -1, host: str = "",
                               port: int = 0) -> UpdateRaftVoterResponse:
    """The answer, with the leader as this replica knows it (its endpoint on the listener
    asked), so a voter that asked a former leader can follow the new one."""
    leader = update_resp.CurrentLeader(leader_id=cast(BrokerId, leader_id), leader_epoch=cast(i32, leader_epoch),
                                       host=host, port=cast(i32, port))
    return UpdateRaftVoterResponse(throttle_time=_NO_THROTTLE, error_code=error, current_leader=leader)


def response_for(request: MembershipRequest, error: ErrorCode, message: str | None = None) -> MembershipResponse:
    """The answer of `request`'s own API (UpdateRaftVoter's carries no message and, built
    here, no leader: use update_raft_voter_response to name one)."""
    if isinstance(request, AddRaftVoterRequest):
        return add_raft_voter_response(error, message)
    if isinstance(request, RemoveRaftVoterRequest):
        return remove_raft_voter_response(error, message)
    return update_raft_voter_response(error)


# ---------------------------------------------------------------- reading responses


def response_error(response: MembershipResponse) -> tuple[ErrorCode, str | None]:
    """(error code, the leader's message if it sent one)."""
    return response.error_code, getattr(response, "error_message", None)
