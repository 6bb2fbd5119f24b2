"""The client listener's read side: Kafka consumers read the metadata log.

The Raft log is partition 0 of topic `__cluster_metadata` (topic id 1, Kafka's), and any
Kafka consumer can read it from offset 0 to the high watermark:

- Metadata names its leader (the Raft leader), leader epoch, replicas and ISR (the voters),
  next to the topics of the metadata image, which exist here as metadata only: no node
  stores data for them, so Fetch and ListOffsets answer UNKNOWN_TOPIC_OR_PARTITION.
- ListOffsets and OffsetForLeaderEpoch answer with leader epochs (KIP-320).
- Fetch sends the log's own segment bytes (a FileRegion the server sendfile()s), but for the
  few batches holding SCRAM credentials, which go rewritten without them
  (credential_redaction.py), never past the high watermark, with DivergingEpoch when the fetcher's last epoch disagrees with the
  log. Below the log start it answers OFFSET_OUT_OF_RANGE, as Kafka does, naming (v12+) the
  snapshot the log starts at, which FetchSnapshot serves on this listener (client_api).
  With nothing to send it waits, up to the request's MaxWait, for the high watermark or
  the leadership to change (woken by the node after each step of the core).

Every request naming a CurrentLeaderEpoch is fenced as KIP-320 rules: older than ours is
FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, -1 is not checked. These rules, the
divergence check and the end offset of an epoch are kraft.raft.epochs', the very ones the
core applies to replicas, read from the core's epoch history; this module reads the log
only through its NodeContext (committed bytes, start and end, that history). Only the Raft
leader serves reads; the others answer NOT_LEADER_OR_FOLLOWER and name the leader. Fetch reads
the same way whatever the ReplicaId: replicas fetch from the core on the controller
listener, and on this one every fetcher is a consumer (it never moves the high watermark).

Writes are refused with a reason: Produce (registered so that ApiVersions advertises
Produce v3+, without which librdkafka does not fetch message format v2) and DeleteRecords
(KIP-630: the metadata log is trimmed by snapshots only).
"""

import asyncio
import uuid
from collections.abc import Container
from datetime import timedelta
from typing import Any

from kraft.metadata.image import BrokerRegistration, MetadataImage, TopicImage
from kraft.protocol import ErrorCode, InvalidRequestError, KafkaServer
from kraft.protocol.build import build_response
from kraft.raft.epochs import UNKNOWN, fence
from kraft.raft.messages import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID, NO_LEADER
from kraft.records import BatchHeader, CorruptRecordError, iter_file_batches, read_batches
from kraft.security.acl import AclOperation, ResourceType
from kraft.server.apis.context import NodeContext
from kraft.server.apis.credential_redaction import CredentialRedaction
from kraft.server.settings.authorization import REFUSED
from kraft.storage import FileRegion

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 21, 23

# ListOffsets' special timestamps.
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
NO_EPOCH = -1
ZERO_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1
SCAN_BYTES = 16 << 20  # bytes of batches a ListOffsets search reads per step
_LEADERSHIP_ERRORS = (
    ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
)

class ClientReads:
    def __init__(self, node: NodeContext) -> None:
        self.node = node
        self.redaction = CredentialRedaction()  # what this listener serves carries no credential
        self._seen: tuple | None = None  # (high watermark, epoch, leader, leading) after the last step
        self._change: asyncio.Future | None = None  # resolved when that changes
        node.after_step(self._on_step)

    def register(self, server: KafkaServer) -> None:
        server.register(PRODUCE, 3, 13, self.produce)
        server.register(FETCH, 4, 18, self.fetch)
        server.register(LIST_OFFSETS, 1, 8, self.list_offsets)
        server.register(METADATA, 0, 13, self.metadata)
        server.register(DELETE_RECORDS, 0, 2, self.delete_records)
        server.register(OFFSET_FOR_LEADER_EPOCH, 2, 4, self.offset_for_leader_epoch)

    @property
    def image(self) -> MetadataImage:
        return self.node.image

    # ---------------------------------------------------------------- waking waiting fetches

    def _on_step(self) -> None:
        node = self.node
        seen = (node.high_watermark, node.epoch, node.leader_id, node.is_leader)
        if seen != self._seen:
            self._seen = seen
            if self._change is not None:
                self._change.set_result(None)
                self._change = None

    async def _wait_for_change(self, timeout: float) -> None:
        """Returns when the high watermark or the leadership changes, or after `timeout` s."""
        if self._change is None:
            self._change = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._change), timeout)
        except TimeoutError:
            pass

    # ---------------------------------------------------------------- where a partition lives

    @staticmethod
    def _is_log(name: str | None, topic_id: uuid.UUID | None) -> bool:
        return name == METADATA_TOPIC if name is not None else topic_id == METADATA_TOPIC_ID

    def _image_topic_of(self, name: str | None, topic_id: uuid.UUID | None) -> TopicImage | None:
        """The image's topic by name, or by id when the name is null."""
        if name is not None:
            return self.image.topic(name)
        return self.image.topics_by_id.get(topic_id.bytes) if topic_id is not None else None

    def _unknown(self, name: str | None, topic_id: uuid.UUID | None) -> ErrorCode:
        """NONE if the topic exists (the log, or a topic of the image), else the error saying
        it does not: by name UNKNOWN_TOPIC_OR_PARTITION, by id UNKNOWN_TOPIC_ID."""
        if self._is_log(name, topic_id) or self._image_topic_of(name, topic_id) is not None:
            return ErrorCode.none
        return ErrorCode.unknown_topic_or_partition if name is not None else ErrorCode.unknown_topic_id

    def _locate(self, partition: int, name: str | None, topic_id: uuid.UUID | None = None) -> ErrorCode:
        """NONE for __cluster_metadata-0, the one partition whose data is here; else why not."""
        if self._is_log(name, topic_id):
            return ErrorCode.none if partition == METADATA_PARTITION else ErrorCode.unknown_topic_or_partition
        return self._unknown(name, topic_id) or ErrorCode.unknown_topic_or_partition

    def _serve(self, partition: int, name: str | None, topic_id: uuid.UUID | None,
               current_leader_epoch: int = NO_EPOCH, operation: AclOperation = AclOperation.DESCRIBE) -> ErrorCode:
        """NONE if this node serves the partition to a client knowing `current_leader_epoch`
        (KIP-320: the leader of that epoch; a client may send -1, any epoch) and allowed
        `operation` on the topic (ACLs, when on: checked first, so a topic's existence is not
        told to whoever may not see it, as Kafka answers)."""
        return self._denied(operation, name, topic_id) or self._locate(partition, name, topic_id) or fence(
            current_leader_epoch, self.node.epoch, self.node.is_leader, unchecked_allowed=True)

    def _denied(self, operation: AclOperation, name: str | None, topic_id: uuid.UUID | None) -> ErrorCode:
        """TOPIC_AUTHORIZATION_FAILED if the request's principal may not `operation` the topic."""
        authorization = self.node.authorization
        if not authorization.enabled:
            return ErrorCode.none
        if name is None:
            topic = self._image_topic_of(None, topic_id)
            name = METADATA_TOPIC if self._is_log(None, topic_id) else (topic.name if topic is not None else None)
        if name is None or authorization.allowed(operation, ResourceType.TOPIC, name):
            return ErrorCode.none  # an unknown id is answered as unknown
        return ErrorCode.topic_authorization_failed

    def _leader_and_epoch(self, listed: Container[int] | None = None) -> dict[str, int]:
        """The leader and its epoch, or both unknown (-1) while no leader is known or the
        leader is not among the brokers a client can reach (a restarted node learns their
        endpoints only as it replays the log). A leader given without an endpoint, or an
        epoch without a leader (a candidate's, the one the next leader takes), would make
        the leader's arrival look like no change, and librdkafka validates its position
        with OffsetForLeaderEpoch only on an epoch change."""
        leader = self.node.leader_id
        if leader is None or leader not in (self.brokers() if listed is None else listed):
            return {"leader_id": NO_LEADER, "leader_epoch": NO_EPOCH}
        return {"leader_id": leader, "leader_epoch": self.node.epoch}

    def _epoch_before(self, offset: int) -> int:
        """The epoch of the record before `offset` (-1: none known), for ListOffsets."""
        epoch = self.node.history.epoch_before(offset)
        return epoch if epoch is not None else NO_EPOCH

    # ---------------------------------------------------------------- Metadata

    def brokers(self) -> dict[int, dict[str, Any]]:
        """The brokers of the image a client may use, by id, at their endpoint of this
        listener's name: the unfenced ones, the Raft leader even if it is fenced (it serves
        the metadata log whatever its broker state), and the node answering, which is
        alive: while a restarted cluster elects a leader and its brokers are still fenced,
        a client keeps a broker to ask again (librdkafka, left with none, stops asking)."""
        listener = self.node.config.client_listener
        assert listener is not None
        found: dict[int, dict[str, Any]] = {}
        me = self.node.config.node_id
        for broker in self.image.brokers.values():
            endpoint = next((e for e in broker.endpoints if e.name == listener.name), None)
            if endpoint is not None and (not broker.fenced or broker.id in (self.node.leader_id, me)):
                found[broker.id] = {"node_id": broker.id, "host": endpoint.host, "port": endpoint.port,
                                    "rack": broker.rack}
        if me not in found and self.node.advertised_client_address is not None:  # not in the image (yet)
            host, port = self.node.advertised_client_address
            found[me] = {"node_id": me, "host": host, "port": port, "rack": None}
        return dict(sorted(found.items()))

    def fenced_brokers(self) -> dict[int, dict[str, Any]]:
        """The image's fenced brokers at their endpoint of this listener's name, by id: what
        DescribeCluster v2 adds when asked to include them (KIP-1073)."""
        listener = self.node.config.client_listener
        assert listener is not None
        found: dict[int, dict[str, Any]] = {}
        for broker in self.image.brokers.values():
            endpoint = next((e for e in broker.endpoints if e.name == listener.name), None)
            if endpoint is not None and broker.fenced:
                found[broker.id] = {"node_id": broker.id, "host": endpoint.host, "port": endpoint.port,
                                    "rack": broker.rack}
        return dict(sorted(found.items()))

    def _log_topic(self, listed: Container[int]) -> dict[str, Any]:
        voters = sorted(self.node.controller_endpoints())
        leader = self._leader_and_epoch(listed)
        partition = {
            "error_code": ErrorCode.none if leader["leader_id"] != NO_LEADER else ErrorCode.leader_not_available,
            "partition_index": METADATA_PARTITION,
            **leader,
            "replica_nodes": voters,
            "isr_nodes": voters,
            "offline_replicas": [],
        }
        return {"error_code": ErrorCode.none, "name": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID,
                "is_internal": True, "partitions": [partition]}

    def _image_topic(self, topic: TopicImage, listener: str, listed: Container[int]) -> dict[str, Any]:
        """A topic of the image. A leader the answer's broker list lacks is given as none
        (LEADER_NOT_AVAILABLE; LISTENER_NOT_FOUND for a live broker without this listener,
        as Kafka), since a client cannot reach a broker it was not told of: kafka-python
        fails with UnknownBrokerIdError for as long as it keeps that answer."""
        def offline(broker: BrokerRegistration | None) -> bool:
            return broker is None or broker.fenced or all(e.name != listener for e in broker.endpoints)

        def leader_error(leader: int) -> ErrorCode:
            if leader in listed:
                return ErrorCode.none
            broker = self.image.broker(leader)
            if broker is not None and not broker.fenced:  # alive, but without this listener
                return ErrorCode.listener_not_found
            return ErrorCode.leader_not_available

        partitions = [
            {
                "error_code": leader_error(p.leader),
                "partition_index": index,
                "leader_id": p.leader if p.leader in listed else NO_LEADER,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": p.replicas,
                "isr_nodes": p.isr,
                "offline_replicas": [r for r in p.replicas if offline(self.image.broker(r))],
            }
            for index, p in enumerate(topic.partitions)
        ]
        return {"error_code": ErrorCode.none, "name": topic.name, "topic_id": uuid.UUID(bytes=topic.id),
                "is_internal": False, "partitions": partitions}

    def _requested_topic(self, name: str | None, topic_id: uuid.UUID | None, listener: str,
                         listed: Container[int]) -> dict[str, Any]:
        if self._is_log(name, topic_id):
            return self._log_topic(listed)
        topic = self._image_topic_of(name, topic_id)
        if topic is None:
            return {"error_code": self._unknown(name, topic_id), "name": name, "topic_id": topic_id or ZERO_UUID,
                    "partitions": []}
        return self._image_topic(topic, listener, listed)

    async def metadata(self, header: Any, request: Any) -> Any:
        """Brokers, a controller and topics; topics are looked up by name, or by id (v12+)
        when the name is null. No topic is created automatically.

        The controller named is this node, as Kafka's KRaft brokers name some live broker
        rather than the active controller (KIP-590): every node serves the admin writes,
        forwarding them to the active controller, so a client's admin requests go to the
        node it already reaches, and a leadership change is the node's to follow, not the
        client's (no NOT_CONTROLLER, no new Metadata round)."""
        version = header.request_api_version
        listener = self.node.config.client_listener
        assert listener is not None
        brokers = self.brokers()  # every leader and the controller named come from this one list
        if request.topics is None or (version == 0 and not request.topics):
            image_topics = self.image.topics_by_name
            topics = [self._log_topic(brokers)] + [self._image_topic(image_topics[n], listener.name, brokers)
                                                   for n in sorted(image_topics.keys())]
            # All topics: those the principal may not DESCRIBE are left out (Kafka's rule).
            topics = [t for t in topics if not self._denied(AclOperation.DESCRIBE, t["name"], None)]
        else:
            if version < 12 and any(t.name is None for t in request.topics):
                # Kafka's KafkaApis refuses it alike: ids replace names only from v12, and a
                # v10-v11 answer cannot carry a topic without a name.
                raise InvalidRequestError(
                    f"Metadata v{version}: a topic name may be null only from v12"
                )
            topics = [self._requested_topic(t.name, getattr(t, "topic_id", None), listener.name, brokers)
                      if not self._denied(AclOperation.DESCRIBE, t.name, getattr(t, "topic_id", None))
                      else {"error_code": ErrorCode.topic_authorization_failed, "name": t.name,
                            "topic_id": ZERO_UUID, "partitions": []}
                      for t in request.topics]
        me = self.node.node_id
        return build_response(METADATA, version, {
            "throttle_time": timedelta(0),
            "brokers": list(brokers.values()),
            "cluster_id": self.node.cluster_id,
            "controller_id": me if me in brokers else NO_LEADER,
            "topics": topics,
            "error_code": ErrorCode.none,
        })

    # ---------------------------------------------------------------- ListOffsets

    async def list_offsets(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        topics = []
        for topic in request.topics:
            partitions = [await self._list_offset(topic.name, p) for p in topic.partitions]
            topics.append({"name": topic.name, "partitions": partitions})
        return build_response(LIST_OFFSETS, version, {"throttle_time": timedelta(0), "topics": topics})

    async def _list_offset(self, name: str, p: Any) -> dict[str, Any]:
        """EARLIEST: the log start; LATEST: the high watermark (there are no transactions, so
        the last stable offset too); MAX_TIMESTAMP: the record with the largest timestamp; a
        timestamp: the first record at or after it (-1 if none). Each with the epoch of the
        record at the offset (for LATEST, of the last record below it)."""
        entry: dict[str, Any] = {"partition_index": p.partition_index, "error_code": ErrorCode.none,
                                 "timestamp": -1, "offset": -1, "leader_epoch": NO_EPOCH}
        error = self._serve(p.partition_index, name, None, getattr(p, "current_leader_epoch", NO_EPOCH))
        hw, target = self.node.high_watermark, p.timestamp
        if error:
            entry["error_code"] = error
        elif target in (EARLIEST, EARLIEST_LOCAL):
            start = self.node.log_start
            entry.update(offset=start, leader_epoch=self._epoch_before(start + 1))  # the record at the start
        elif target < MAX_TIMESTAMP:
            entry["error_code"] = ErrorCode.invalid_request
        elif hw is None:
            entry["error_code"] = ErrorCode.offset_not_available  # a new leader that has not committed yet
        elif target == LATEST:
            entry.update(offset=hw, leader_epoch=self._epoch_before(hw))
        else:
            found = await self._search(None if target == MAX_TIMESTAMP else target)
            if found is not None:
                entry.update(timestamp=found[0], offset=found[1], leader_epoch=found[2])
        return entry

    async def _search(self, target: int | None) -> tuple[int, int, int] | None:
        """(timestamp, offset, epoch) of the first record at or after `target`, or with the
        largest timestamp if `target` is None, below the high watermark. Batch headers are
        walked (their max timestamps) in a worker thread, then the one batch found is
        decoded to pick the record. There is no time index: the walk is linear."""
        node = self.node
        best: tuple[BatchHeader, FileRegion] | None = None
        offset = node.log_start
        while True:
            hw = node.high_watermark
            offset = max(offset, node.log_start)  # retention may have moved on meanwhile
            if hw is None or offset >= hw:
                break
            info = node.read_committed(offset, SCAN_BYTES)
            if not info.size:
                break
            assert isinstance(info.data, FileRegion)
            header = await asyncio.to_thread(_scan, info.data, target)
            if header is not None and (best is None or header.max_timestamp > best[0].max_timestamp):
                best = (header, info.data)
                if target is not None:
                    break
            offset = info.next_offset
        if best is None:
            return None
        header, region = best
        wanted = target if target is not None else header.max_timestamp
        timestamp, offset = await asyncio.to_thread(_first_record_at, region, header, wanted)
        return timestamp, offset, header.partition_leader_epoch

    # ---------------------------------------------------------------- OffsetForLeaderEpoch

    async def offset_for_leader_epoch(self, header: Any, request: Any) -> Any:
        """For each (partition, LeaderEpoch): the largest epoch <= it and where it ends in the
        leader's log (for the latest epoch, the log end), as Kafka answers."""
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                entry = {"partition": p.partition, "error_code": ErrorCode.none, "leader_epoch": NO_EPOCH,
                         "end_offset": -1}
                error = self._serve(p.partition, topic.topic, None, p.current_leader_epoch)
                if error:
                    entry["error_code"] = error
                else:
                    end = self.node.history.end_of_epoch(p.leader_epoch)
                    entry.update(leader_epoch=end.epoch, end_offset=end.offset)
                partitions.append(entry)
            topics.append({"topic": topic.topic, "partitions": partitions})
        return build_response(OFFSET_FOR_LEADER_EPOCH, header.request_api_version,
                              {"throttle_time": timedelta(0), "topics": topics})

    # ---------------------------------------------------------------- Fetch

    async def fetch(self, header: Any, request: Any) -> Any:
        """A consumer's fetch, without fetch sessions (every request is a full one and the
        answer's session id is 0, which tells the client no session was made)."""
        version = header.request_api_version
        error = _session_error(request) if version >= 7 else ErrorCode.none
        if error:
            return build_response(FETCH, version, {"throttle_time": timedelta(0), "error_code": error,
                                                   "session_id": 0, "responses": []})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.max_wait.total_seconds()
        while True:
            responses, size, urgent = self._fetch_now(version, request)
            remaining = deadline - loop.time()
            if urgent or size >= request.min_bytes or remaining <= 0:
                break
            await self._wait_for_change(remaining)
        self.node.metrics.fetch_bytes.inc(size)
        endpoints = []
        leader = self.node.leader_id
        if version >= 16 and leader is not None and any(
            p["error_code"] in _LEADERSHIP_ERRORS for t in responses for p in t["partitions"]
        ):
            endpoints = [b for b in self.brokers().values() if b["node_id"] == leader]
        return build_response(FETCH, version, {"throttle_time": timedelta(0), "error_code": ErrorCode.none,
                                               "session_id": 0, "responses": responses,
                                               "node_endpoints": endpoints})

    def _fetch_now(self, version: int, request: Any) -> tuple[list[dict[str, Any]], int, bool]:
        """(topic responses, record bytes, whether to answer at once: an error or a divergence)."""
        budget = request.max_bytes
        read_committed = request.isolation_level == READ_COMMITTED
        responses = []
        size, urgent = 0, False
        for topic in request.topics:
            name, topic_id = (None, topic.topic_id) if version >= 13 else (topic.topic, None)
            partitions = []
            for p in topic.partitions:
                entry, records = self._fetch_partition(version, name, topic_id, p, budget - size, size == 0)
                entry["aborted_transactions"] = [] if read_committed else None
                partitions.append(entry)
                size += records
                urgent = urgent or "diverging_epoch" in entry or entry["error_code"] not in (
                    ErrorCode.none, ErrorCode.offset_not_available)
            responses.append({"topic": name, "topic_id": topic_id, "partitions": partitions})
        return responses, size, urgent

    def _fetch_partition(self, version: int, name: str | None, topic_id: uuid.UUID | None, p: Any,
                         budget: int, first: bool) -> tuple[dict[str, Any], int]:
        """One partition's answer and its record bytes. The first partition with data gets at
        least one batch whatever the byte limits (KIP-74); the others share what is left."""
        entry: dict[str, Any] = {"partition_index": p.partition, "error_code": ErrorCode.none,
                                 "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                                 "preferred_read_replica": NO_LEADER, "records": b""}
        node, offset = self.node, p.fetch_offset
        hw, start = node.high_watermark, node.log_start
        error = self._serve(p.partition, name, topic_id, p.current_leader_epoch if version >= 9 else NO_EPOCH,
                            AclOperation.READ)
        if not error and hw is None:
            error = ErrorCode.offset_not_available  # a new leader that has not committed yet
        if not error and offset < start:
            error = ErrorCode.offset_out_of_range  # whatever the epochs say, as Kafka's leader answers
        # The fetcher's LastFetchedEpoch (-1: none) against this log, the core's check of a
        # replica: before FetchOffset is checked against the log end, as in Kafka, so a
        # fetcher past the end of a log that lost its history learns where it diverged. A
        # history that cannot tell is OUT_OF_RANGE for a consumer.
        diverging = None
        if not error:
            diverging = node.history.diverging(offset, p.last_fetched_epoch if version >= 12 else NO_EPOCH)
            if diverging == UNKNOWN:
                diverging, error = None, ErrorCode.offset_out_of_range
        if not error and diverging is None and offset > node.log_end:
            error = ErrorCode.offset_out_of_range  # past the end, and not because the fetcher's history diverged
        if error:
            entry["error_code"] = error
            if error in _LEADERSHIP_ERRORS:
                entry["current_leader"] = self._leader_and_epoch()
            elif error == ErrorCode.offset_out_of_range and offset < start and version >= 12:
                entry["snapshot_id"] = self._snapshot_at(start)
            return entry, 0
        assert hw is not None
        entry.update(high_watermark=hw, last_stable_offset=hw, log_start_offset=start)
        if diverging is not None:
            entry["diverging_epoch"] = {"epoch": diverging.epoch, "end_offset": diverging.offset}
            return entry, 0
        limit = min(p.partition_max_bytes, budget)
        if offset >= hw or (limit <= 0 and not first):
            return entry, 0
        info = node.read_committed(offset, max(limit, 0))
        entry["records"] = self.redaction.log_records(info.data) if info.size else b""
        return entry, info.size

    def _snapshot_at(self, start: int) -> dict[str, int]:
        """The id of the snapshot the log starts at (-1, -1: none), sent with OFFSET_OUT_OF_RANGE
        to a fetcher below it: where a reader that can take a snapshot goes on, as a replica
        would from a SnapshotId answer (KIP-630). Kafka's clients ignore the tagged field.
        The log holds nothing before its start, so the history's epoch there is that snapshot's."""
        epoch = self.node.history.epoch_before(start)
        return {"end_offset": start, "epoch": epoch} if epoch is not None else {"end_offset": -1, "epoch": -1}

    # ---------------------------------------------------------------- writes, refused

    def _produce_refusal(self, name: str | None, topic_id: uuid.UUID | None) -> tuple[ErrorCode, str]:
        if self._denied(AclOperation.WRITE, name, topic_id):
            return ErrorCode.topic_authorization_failed, REFUSED
        if self._is_log(name, topic_id):
            return ErrorCode.policy_violation, (
                f"{METADATA_TOPIC} is written by the controller only; change metadata through the admin APIs"
            )
        error = self._unknown(name, topic_id)
        if error:
            return error, f"unknown topic {name if name is not None else topic_id}"
        return ErrorCode.invalid_request, (
            f"topic {name if name is not None else topic_id} exists as metadata only: kraft stores no data for it"
        )

    async def produce(self, header: Any, request: Any) -> Any:
        """Every partition refused (there is nothing a client may write); with acks=0 the
        client expects no answer, and gets none."""
        version = header.request_api_version
        if request.acks == 0:
            return None
        responses = []
        for topic in request.topic_data:
            name, topic_id = (None, topic.topic_id) if version >= 13 else (topic.name, None)
            error, message = self._produce_refusal(name, topic_id)
            partitions = [{"index": p.index, "error_code": error, "base_offset": -1, "log_append_time": None,
                           "log_start_offset": -1, "record_errors": [], "error_message": message}
                          for p in topic.partition_data]
            responses.append({"name": name, "topic_id": topic_id, "partition_responses": partitions})
        return build_response(PRODUCE, version, {"responses": responses, "throttle_time": timedelta(0)})

    async def delete_records(self, header: Any, request: Any) -> Any:
        """KIP-630: the metadata log's start moves only past a snapshot, so POLICY_VIOLATION."""
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                error = self._denied(AclOperation.DELETE, topic.name, None) or self._locate(p.partition_index,
                                                                                            topic.name)
                partitions.append({"partition_index": p.partition_index, "low_watermark": -1,
                                   "error_code": error or ErrorCode.policy_violation})
            topics.append({"name": topic.name, "partitions": partitions})
        return build_response(DELETE_RECORDS, header.request_api_version,
                              {"throttle_time": timedelta(0), "topics": topics})


def _session_error(request: Any) -> ErrorCode:
    """No fetch sessions are made here (KIP-227): a request must be a sessionless full one."""
    if request.session_id != 0:
        return ErrorCode.fetch_session_id_not_found
    return ErrorCode.none if request.session_epoch in (0, -1) else ErrorCode.invalid_fetch_session_epoch


def _scan(region: FileRegion, target: int | None) -> BatchHeader | None:
    """The first batch of `region` whose max timestamp is at or after `target`, or (target
    None) the first with the region's largest max timestamp. Headers only, CRCs not checked
    (the log checked them when it took the batches)."""
    best = None
    end = region.position + region.length
    for h in iter_file_batches(region.fileno(), region.position, end, verify_crc=False):
        if target is not None and h.max_timestamp >= target:
            return h
        if target is None and (best is None or h.max_timestamp > best.max_timestamp):
            best = h
    return best


def _first_record_at(region: FileRegion, header: BatchHeader, timestamp: int) -> tuple[int, int]:
    """(timestamp, offset) of the first record of the batch at or after `timestamp`."""
    data = FileRegion(region.file, header.position, header.size).read()
    for batch in read_batches(data, position=header.position):
        for record in batch.records():
            if record.timestamp >= timestamp:
                return record.timestamp, record.offset
    raise CorruptRecordError(header.position, f"no record reaches the batch's max timestamp {timestamp}")
