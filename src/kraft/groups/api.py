"""The group APIs on a node's client listener: kio's requests in, the coordinators' answers out.

Each request of a group goes to the coordinator of the group's `__consumer_offsets`
partition (`partition_for`), which must be this node's replica of it, leading: else the
answer is NOT_COORDINATOR and the client asks FindCoordinator again (Kafka's rule). The
handlers see the node only as a `GroupContext`: how many partitions there are, a way to run
an operation on a partition's coordinator as one step of that partition's Raft core, where
each partition's leader listens, and which topic partitions exist. They read each version
of each request into the coordinator's messages (messages.py) and build the version's
response from its answer, so the coordinator knows nothing of versions.

Versions served: Kafka's that kio holds, which covers what the clients ask for (each uses
the highest version both sides speak): librdkafka 2.x JoinGroup 5, SyncGroup 3, Heartbeat 3,
LeaveGroup 1, OffsetCommit 9, OffsetFetch 9, and it enables groups only if version 0 of
FindCoordinator, JoinGroup, SyncGroup, Heartbeat and LeaveGroup, OffsetCommit 1-2 and
OffsetFetch 1 are listed; kafkajs 2.2 JoinGroup 5, SyncGroup 3, Heartbeat 3, LeaveGroup 3,
OffsetCommit 5, OffsetFetch 4, FindCoordinator 2; kafka-python 2.x JoinGroup 5, SyncGroup 3,
OffsetCommit 7, OffsetFetch 5, and 3.x JoinGroup 7, SyncGroup 5, OffsetCommit 8, OffsetFetch
8. OffsetCommit 10 and OffsetFetch 10 name topics by id, which is not served.

Authorization is Kafka's KafkaApis' (with the authorizer on; `GroupContext.allowed` is
always true with it off), decided before the coordinator is asked, so a refused call
changes nothing: FindCoordinator DESCRIBE on the group (or the transactional id); JoinGroup,
SyncGroup, Heartbeat, LeaveGroup and OffsetCommit READ on the group; OffsetFetch,
DescribeGroups DESCRIBE on it; OffsetDelete and DeleteGroups DELETE; else
GROUP_AUTHORIZATION_FAILED where the API puts its error. OffsetCommit and OffsetDelete also
need READ on each topic, OffsetFetch DESCRIBE (TOPIC_AUTHORIZATION_FAILED per partition, and
topics not describable left out of an all-topics answer); ListGroups lists only the groups
the caller may DESCRIBE, unless it may DESCRIBE the cluster.

Refusals follow Kafka's: the whole request fails with the coordinator's error
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS; a commit that timed out is
COORDINATOR_NOT_AVAILABLE, and NOT_COORDINATOR for OffsetFetch, as Kafka maps them), and an
OffsetCommit or OffsetDelete of a topic partition the cluster does not have is
UNKNOWN_TOPIC_OR_PARTITION for that partition, before the coordinator is asked.
"""

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from kraft.groups.coordinator import GroupCoordinator
from kraft.groups.group_messages import (
    NONE,
    CommitPartition,
    CommitRequest,
    DescribedGroup,
    FetchAnswer,
    FetchedOffset,
    JoinAnswer,
    JoinRequest,
    LeaveAnswer,
    ListedGroup,
    OffsetDeleteAnswer,
    SyncAnswer,
    SyncRequest,
)
from kraft.groups.partitioning import OFFSETS_TOPIC, partition_for
from kraft.groups.replies import CoordinatorError, Reply
from kraft.protocol import ErrorCode, KafkaServer, write_answers
from kraft.protocol.build import build_response
from kraft.protocol.session import current_session
from kraft.security.acl import CLUSTER_NAME, AclOperation, ResourceType

T = TypeVar("T")

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 13, 14, 15, 16, 42, 47
VERSIONS = {
    FIND_COORDINATOR: (0, 6),
    JOIN_GROUP: (0, 9),
    SYNC_GROUP: (0, 5),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (1, 9),
    LIST_GROUPS: (0, 5),
    DESCRIBE_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
}
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator's key types (2: share group)
READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
# AclEntry.supportedOperations(GROUP): what DescribeGroups' authorized_operations may hold.
GROUP_OPERATIONS = (READ, DESCRIBE, DELETE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)
_NO_OPERATIONS = -(2**31)  # authorized_operations when not asked for
_ZERO = timedelta(0)


class GroupContext(Protocol):
    """What the group handlers need of their node."""

    @property
    def offsets_partitions(self) -> int:
        """`offsets.topic.num.partitions`: how many partitions `__consumer_offsets` has."""
        ...

    async def run(self, partition: int, action: Callable[[GroupCoordinator, int], T]) -> T | None:
        """`action(coordinator, now)` on this node's coordinator of `partition`, in a step of
        that partition's Raft core (its records go out in that step; the requests of one turn
        of the loop share it); None if this node holds no replica of the partition, or no
        longer steps. Exceptions reach the caller."""
        ...

    def coordinator_endpoint(self, partition: int) -> tuple[int, str, int] | None:
        """(node id, host, port) of the client listener of the partition's leader, or None
        while no leader is known."""
        ...

    def knows_partition(self, topic: str, partition: int) -> bool:
        """Whether the cluster has this topic partition (offsets are kept only for those)."""
        ...

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether the principal of the request being handled may do `operation` on the
        resource (Kafka's StandardAuthorizer on the node's ACLs); True with the authorizer off."""
        ...


GROUP_REFUSED = ErrorCode.group_authorization_failed
# FindCoordinator's check per key type: (operation, resource type, error, Kafka's message before v4)
_FIND_REFUSALS = {
    GROUP_KEY: (DESCRIBE, GROUP, GROUP_REFUSED, "Group authorization failed."),
    TRANSACTION_KEY: (DESCRIBE, ResourceType.TRANSACTIONAL_ID, ErrorCode.transactional_id_authorization_failed,
                      "Transactional Id authorization failed."),
}


def _ms(value: timedelta) -> int:
    return round(value.total_seconds() * 1000)


def _client_host() -> str:
    """The client's address as Kafka's coordinator records it (InetAddress.toString)."""
    return "/" + current_session().client_address[0]


def _write_error(e: CoordinatorError) -> ErrorCode:
    """Kafka's mapping for a write that failed: a commit that timed out asks the client to retry."""
    return ErrorCode.coordinator_not_available if e.error == ErrorCode.request_timed_out else e.error


def _read_error(e: CoordinatorError) -> ErrorCode:
    """OffsetFetch's: NOT_COORDINATOR also for a timeout (older clients retry only on that)."""
    return ErrorCode.not_coordinator if e.error == ErrorCode.request_timed_out else e.error


async def settled(reply: Reply) -> Any:
    """The reply's answer once sent; raises the CoordinatorError it failed with."""
    if not reply.done:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake(_: Any) -> None:
            if not future.done():
                future.set_result(None)

        reply.add_done_callback(wake)
        await future
    return reply.result()


class GroupApi:
    def __init__(self, context: GroupContext) -> None:
        self.context = context

    def register(self, server: KafkaServer) -> None:
        handlers = {
            FIND_COORDINATOR: self.find_coordinator, JOIN_GROUP: self.join_group, SYNC_GROUP: self.sync_group,
            HEARTBEAT: self.heartbeat, LEAVE_GROUP: self.leave_group, OFFSET_COMMIT: self.offset_commit,
            OFFSET_FETCH: self.offset_fetch, LIST_GROUPS: self.list_groups, DESCRIBE_GROUPS: self.describe_groups,
            DELETE_GROUPS: self.delete_groups, OFFSET_DELETE: self.offset_delete,
        }
        for key, handler in handlers.items():
            server.register(key, *VERSIONS[key], handler)

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.context.offsets_partitions)

    async def _ask(self, partition: int, action: Callable[[GroupCoordinator, int], Reply]) -> Any:
        reply = await self.context.run(partition, action)
        if reply is None:
            raise CoordinatorError(ErrorCode.not_coordinator,
                                   f"this node holds no replica of {OFFSETS_TOPIC}-{partition}")
        return await settled(reply)

    async def _ask_group(self, group_id: str, action: Callable[[GroupCoordinator, int], Reply]) -> Any:
        return await self._ask(self.partition_of(group_id), action)

    def _may(self, operation: AclOperation, group_id: str) -> bool:
        return self.context.allowed(operation, GROUP, group_id)

    def _topics_allowed(self, operation: AclOperation, names: Sequence[str]) -> set[str]:
        """The topics among `names` the caller may `operation` (each decided once)."""
        return {name for name in set(names) if self.context.allowed(operation, TOPIC, name)}

    # ---------------------------------------------------------------- FindCoordinator

    def _coordinator(self, key: str, key_type: int, version: int) -> dict[str, Any]:
        found: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1,
                                 "error_code": NONE, "error_message": None}
        refusal = _FIND_REFUSALS.get(key_type)
        if refusal is not None and not self.context.allowed(refusal[0], refusal[1], key):
            # Kafka's message only in the versions before batching (v4 answers without one)
            found.update(error_code=refusal[2], error_message=refusal[3] if version < 4 else None)
            return found
        if key_type != GROUP_KEY:
            found.update(error_code=ErrorCode.invalid_request,
                         error_message=f"kraft has only a group coordinator; key type {key_type} is not one")
            return found
        partition = self.partition_of(key)
        endpoint = self.context.coordinator_endpoint(partition)
        if endpoint is None:
            found.update(error_code=ErrorCode.coordinator_not_available,
                         error_message=f"no leader of {OFFSETS_TOPIC}-{partition} is known yet")
        else:
            found.update(node_id=endpoint[0], host=endpoint[1], port=endpoint[2])
        return found

    async def find_coordinator(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        key_type = getattr(request, "key_type", GROUP_KEY)
        if version >= 4:
            coordinators = [self._coordinator(key, key_type, version) for key in request.coordinator_keys]
            return build_response(FIND_COORDINATOR, version, {"throttle_time": _ZERO, "coordinators": coordinators})
        return build_response(FIND_COORDINATOR, version,
                              {"throttle_time": _ZERO} | self._coordinator(request.key, key_type, version))

    # ---------------------------------------------------------------- JoinGroup, SyncGroup, Heartbeat, LeaveGroup

    async def join_group(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        session_timeout = _ms(request.session_timeout)
        join = JoinRequest(
            request.group_id, request.member_id, request.protocol_type,
            tuple((p.name, p.metadata) for p in request.protocols), session_timeout,
            _ms(request.rebalance_timeout) if version >= 1 else session_timeout,
            header.client_id or "", _client_host(), getattr(request, "group_instance_id", None),
            requires_known_member_id=version >= 4)
        if not self._may(READ, join.group_id):
            answer = JoinAnswer(GROUP_REFUSED, "")  # Kafka's error answer: no member id, no generation
        else:
            try:
                answer = await self._ask_group(join.group_id, lambda c, now: c.join_group(join, now))
            except CoordinatorError as e:
                answer = JoinAnswer(_write_error(e), request.member_id)
        return build_response(JOIN_GROUP, version, {
            "throttle_time": _ZERO, "error_code": answer.error, "generation_id": answer.generation,
            "protocol_type": answer.protocol_type,
            "protocol_name": answer.protocol_name if version >= 7 else answer.protocol_name or "",
            "leader": answer.leader, "skip_assignment": False, "member_id": answer.member_id,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                        for m in answer.members],
        })

    async def sync_group(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        sync = SyncRequest(
            request.group_id, request.member_id, request.generation_id,
            tuple((a.member_id, a.assignment) for a in request.assignments),
            getattr(request, "protocol_type", None), getattr(request, "protocol_name", None),
            getattr(request, "group_instance_id", None))
        if version >= 5 and (sync.protocol_type is None or sync.protocol_name is None):
            answer = SyncAnswer(ErrorCode.inconsistent_group_protocol)  # mandatory from v5, checked first
        elif not self._may(READ, sync.group_id):
            answer = SyncAnswer(GROUP_REFUSED)
        else:
            try:
                answer = await self._ask_group(sync.group_id, lambda c, now: c.sync_group(sync, now))
            except CoordinatorError as e:
                answer = SyncAnswer(_write_error(e))
        return build_response(SYNC_GROUP, version, {
            "throttle_time": _ZERO, "error_code": answer.error, "protocol_type": answer.protocol_type,
            "protocol_name": answer.protocol_name, "assignment": answer.assignment})

    async def heartbeat(self, header: Any, request: Any) -> Any:
        group_id, member_id, generation = request.group_id, request.member_id, request.generation_id
        instance_id = getattr(request, "group_instance_id", None)
        error: ErrorCode = GROUP_REFUSED
        if self._may(READ, group_id):
            try:
                error = await self._ask_group(
                    group_id, lambda c, now: c.heartbeat(group_id, member_id, generation, instance_id, now))
            except CoordinatorError as e:
                error = _write_error(e)
        return build_response(HEARTBEAT, header.request_api_version, {"throttle_time": _ZERO, "error_code": error})

    async def leave_group(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        group_id = request.group_id
        if version >= 3:
            members = [(m.member_id, m.group_instance_id) for m in request.members]
        else:
            members = [(request.member_id, None)]
        answer = LeaveAnswer(GROUP_REFUSED)  # Kafka's error answer: no members
        if self._may(READ, group_id):
            try:
                answer = await self._ask_group(group_id, lambda c, now: c.leave_group(group_id, members, now))
            except CoordinatorError as e:
                answer = LeaveAnswer(_write_error(e))
        error = answer.error
        if version < 3 and error is NONE and answer.members:  # one member: its error is the answer's
            error = answer.members[0][2]
        return build_response(LEAVE_GROUP, version, {
            "throttle_time": _ZERO, "error_code": error,
            "members": [{"member_id": m, "group_instance_id": i, "error_code": e} for m, i, e in answer.members]})

    # ---------------------------------------------------------------- offsets

    async def offset_commit(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        partitions = [CommitPartition(topic.name, p.partition_index, p.committed_offset,
                                      getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
                      for topic in request.topics for p in topic.partitions]
        errors: dict[int, ErrorCode] = {}  # index in `partitions` -> its error
        known: list[int] = []
        if not self._may(READ, request.group_id):  # every partition refused, as Kafka's error answer
            errors = dict.fromkeys(range(len(partitions)), GROUP_REFUSED)
        else:
            readable = self._topics_allowed(READ, [p.topic for p in partitions])
            for i, p in enumerate(partitions):
                if p.topic not in readable:
                    errors[i] = ErrorCode.topic_authorization_failed
                elif self.context.knows_partition(p.topic, p.partition):
                    known.append(i)
        if known:
            commit = CommitRequest(
                request.group_id, request.generation_id_or_member_epoch, request.member_id,
                tuple(partitions[i] for i in known), _ms(request.retention_time) if version <= 4 else -1,
                getattr(request, "group_instance_id", None), group_id_not_found_error=version >= 9)
            try:
                answer: tuple[ErrorCode, ...] = await self._ask_group(
                    commit.group_id, lambda c, now: c.commit_offsets(commit, now))
            except CoordinatorError as e:
                answer = (_write_error(e),) * len(known)
            errors.update(zip(known, answer))
        topics: dict[str, list[tuple[int, int]]] = {}
        for i, p in enumerate(partitions):
            topics.setdefault(p.topic, []).append((p.partition, errors.get(i, ErrorCode.unknown_topic_or_partition)))
        return write_answers.offset_commit(version, list(topics.items()))

    async def _fetch_group(self, group_id: str, topics: Any, require_stable: bool) -> FetchAnswer:
        """One group's offsets as the caller may see them: the group refused without DESCRIBE
        on it; a topic asked for that it may not DESCRIBE answered TOPIC_AUTHORIZATION_FAILED
        (the coordinator is not asked for it), and left out of an all-topics answer."""
        if not self._may(DESCRIBE, group_id):
            return FetchAnswer(group_id, GROUP_REFUSED)
        wanted = None if topics is None else [(t.name, t.partition_indexes) for t in topics]
        named = set() if wanted is None else self._topics_allowed(DESCRIBE, [name for name, _ in wanted])
        asked = None if wanted is None else [(name, indexes) for name, indexes in wanted if name in named]
        try:
            answer: FetchAnswer = await self._ask_group(
                group_id, lambda c, now: c.fetch_offsets(group_id, asked, now, require_stable))
        except CoordinatorError as e:
            return FetchAnswer(group_id, _read_error(e))
        if answer.error is not NONE:
            return answer
        if wanted is None:
            shown = self._topics_allowed(DESCRIBE, [o.topic for o in answer.offsets])
            return dataclasses.replace(answer, offsets=tuple(o for o in answer.offsets if o.topic in shown))
        refused = tuple(FetchedOffset(name, i, error=ErrorCode.topic_authorization_failed)
                        for name, indexes in wanted if name not in named for i in indexes)
        return dataclasses.replace(answer, offsets=answer.offsets + refused)

    @staticmethod
    def _fetched_topics(answer: FetchAnswer, topics: Any) -> list[dict[str, Any]]:
        """The answer's offsets by topic; for a refused group (OffsetFetch v1, which has no
        group error) each partition asked with the error."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        if answer.error is not NONE:
            for t in topics or ():
                by_topic[t.name] = [{"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1,
                                     "metadata": "", "error_code": answer.error} for i in t.partition_indexes]
        for o in answer.offsets:
            by_topic.setdefault(o.topic, []).append(
                {"partition_index": o.partition, "committed_offset": o.offset,
                 "committed_leader_epoch": o.leader_epoch, "metadata": o.metadata, "error_code": o.error})
        return [{"name": name, "partitions": ps} for name, ps in by_topic.items()]

    async def offset_fetch(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        require_stable = getattr(request, "require_stable", False)
        if version >= 8:
            answers = await asyncio.gather(*(self._fetch_group(g.group_id, g.topics, require_stable)
                                             for g in request.groups))
            return build_response(OFFSET_FETCH, version, {"throttle_time": _ZERO, "groups": [
                {"group_id": a.group_id, "error_code": a.error,
                 "topics": [] if a.error is not NONE else self._fetched_topics(a, None)}
                for a in answers]})
        answer = await self._fetch_group(request.group_id, request.topics, require_stable)
        if version >= 2:
            topics = [] if answer.error is not NONE else self._fetched_topics(answer, None)
        else:
            topics = self._fetched_topics(answer, request.topics)
        return build_response(OFFSET_FETCH, version, {"throttle_time": _ZERO, "error_code": answer.error,
                                                      "topics": topics})

    async def offset_delete(self, header: Any, request: Any) -> Any:
        group_id = request.group_id
        if not self._may(DELETE, group_id):
            return build_response(OFFSET_DELETE, header.request_api_version, {
                "error_code": GROUP_REFUSED, "throttle_time": _ZERO, "topics": []})
        asked = [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]
        readable = self._topics_allowed(READ, [name for name, _ in asked])
        known = [(name, [i for i in indexes if self.context.knows_partition(name, i)])
                 for name, indexes in asked if name in readable]
        known = [(name, indexes) for name, indexes in known if indexes]
        answer = OffsetDeleteAnswer()
        if known:
            try:
                answer = await self._ask_group(group_id, lambda c, now: c.delete_offsets(group_id, known, now))
            except CoordinatorError as e:
                answer = OffsetDeleteAnswer(_write_error(e))
        topics = [{"name": name, "partitions": [
            {"partition_index": i, "error_code": answer.partitions.get((name, i), ErrorCode.unknown_topic_or_partition)
             if name in readable else ErrorCode.topic_authorization_failed}
            for i in indexes]} for name, indexes in asked]
        return build_response(OFFSET_DELETE, header.request_api_version, {
            "error_code": answer.error, "throttle_time": _ZERO, "topics": [] if answer.error is not NONE else topics})

    # ---------------------------------------------------------------- groups

    async def _per_partition(self, group_ids: Sequence[str],
                             ask: Callable[[Sequence[str]], Callable[[GroupCoordinator, int], Reply]],
                             refused: Callable[[str, ErrorCode], T]) -> list[T]:
        """Asks each partition's coordinator about its groups at once; answers in the
        request's order (a partition that refuses refuses each of its groups)."""
        by_partition: dict[int, list[str]] = {}
        for group_id in group_ids:
            by_partition.setdefault(self.partition_of(group_id), []).append(group_id)

        async def one(partition: int, groups: list[str]) -> list[T]:
            try:
                answer: list[T] = list(await self._ask(partition, ask(groups)))
                return answer
            except CoordinatorError as e:
                return [refused(g, _write_error(e)) for g in groups]

        results = await asyncio.gather(*(one(p, gs) for p, gs in by_partition.items()))
        answers: dict[int, list[T]] = {p: list(r) for p, r in zip(by_partition, results)}
        return [answers[self.partition_of(g)].pop(0) for g in group_ids]

    def _authorized_operations(self, group_id: str) -> int:
        """Kafka's bit field (1 << operation code) of what the caller may do to the group."""
        return sum(1 << op for op in GROUP_OPERATIONS if self.context.allowed(op, GROUP, group_id))

    async def describe_groups(self, header: Any, request: Any) -> Any:
        """Refused groups first, then the described ones (Kafka's order)."""
        allowed = [g for g in request.groups if self._may(DESCRIBE, g)]
        described: list[DescribedGroup] = [DescribedGroup(g, "", error=GROUP_REFUSED)
                                           for g in request.groups if g not in allowed]
        described += await self._per_partition(
            allowed, lambda groups: lambda c, now: c.describe_groups(groups, now),
            lambda g, error: DescribedGroup(g, "", error=error))
        with_operations = header.request_api_version >= 3 and request.include_authorized_operations
        return build_response(DESCRIBE_GROUPS, header.request_api_version, {"throttle_time": _ZERO, "groups": [
            {"error_code": d.error, "error_message": None, "group_id": d.group_id, "group_state": d.state,
             "protocol_type": d.protocol_type, "protocol_data": d.protocol_data,
             "authorized_operations": self._authorized_operations(d.group_id)
             if with_operations and d.error is NONE else _NO_OPERATIONS,
             "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                          "client_id": m.client_id, "client_host": m.client_host, "member_metadata": m.metadata,
                          "member_assignment": m.assignment} for m in d.members]}
            for d in described]})

    async def delete_groups(self, header: Any, request: Any) -> Any:
        """Each group once; the refused ones after the others (Kafka's order)."""
        names = list(dict.fromkeys(request.groups_names))
        allowed = [g for g in names if self._may(DELETE, g)]
        results: list[tuple[str, ErrorCode]] = await self._per_partition(
            allowed, lambda groups: lambda c, now: c.delete_groups(groups, now), lambda g, error: (g, error))
        results += [(g, GROUP_REFUSED) for g in names if g not in allowed]
        return build_response(DELETE_GROUPS, header.request_api_version, {
            "throttle_time": _ZERO, "results": [{"group_id": g, "error_code": e} for g, e in results]})

    async def list_groups(self, header: Any, request: Any) -> Any:
        """The groups of every partition this node leads (clients ask every node): those the
        caller may DESCRIBE, or all of them if it may DESCRIBE the cluster."""
        states = getattr(request, "states_filter", ())
        types = getattr(request, "types_filter", ())
        error = NONE
        listed: list[ListedGroup] = []
        for partition in range(self.context.offsets_partitions):
            try:
                listed += await self._ask(partition, lambda c, now: c.list_groups(now, states, types))
            except CoordinatorError as e:
                if e.error == ErrorCode.coordinator_load_in_progress:
                    error = e.error
        if not self.context.allowed(DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            listed = [g for g in listed if self._may(DESCRIBE, g.group_id)]
        return build_response(LIST_GROUPS, header.request_api_version, {
            "throttle_time": _ZERO, "error_code": error, "groups": [
                {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
                 "group_type": g.group_type} for g in listed]})
