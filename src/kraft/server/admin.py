"""The admin requests the active controller serves: topics, configs, broker lifecycle.

Each request is validated by kraft.metadata's controller against the working image (the
committed one plus what is appended and not yet committed), its records appended through
the Raft leader, and the answer sent only when they are committed. Not the active
controller: NOT_CONTROLLER (clients look up the controller in Metadata and retry). The
commit does not come within the request's timeout: REQUEST_TIMED_OUT.

Brokers register (BrokerRegistration) and then heartbeat (BrokerHeartbeat). A registered
broker starts fenced and is unfenced once its metadata cache has caught up to its own
registration; the active controller fences any broker whose heartbeats stop for
broker.session.timeout.ms, with one small FenceBroker record.
"""

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kraft.controller import NotControllerError, Pending
from kraft.metadata import ControllerError, MetadataImage
from kraft.metadata import controller as ctl
from kraft.metadata.configs import AlterConfigOp, OpType
from kraft.metadata.controller import ControllerResult
from kraft.metadata.image import ConfigResource, ConfigResourceType
from kraft.metadata.records import BrokerEndpoint
from kraft.protocol import ErrorCode, KafkaServer
from kraft.protocol.build import build_response

if TYPE_CHECKING:
    from kraft.server.node import KraftNode

log = logging.getLogger("kraft.server.admin")

CREATE_TOPICS, DELETE_TOPICS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 44
BROKER_REGISTRATION, BROKER_HEARTBEAT = 62, 63
DEFAULT_PARTITIONS = 1  # num.partitions
DEFAULT_REPLICATION_FACTOR = 1  # default.replication.factor


class Refusal(Exception):
    """An answer with an error code before anything was submitted."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _code(error: ControllerError) -> ErrorCode:
    return ErrorCode(int(error.error))


class AdminApi:
    def __init__(self, node: "KraftNode") -> None:
        self.node = node
        self.rng = random.Random()
        self._heartbeats: dict[int, float] = {}  # broker id -> monotonic time of its last heartbeat
        self._active_epoch = -1
        self._expiry_task: asyncio.Task | None = None

    def register(self, server: KafkaServer) -> None:
        server.register(CREATE_TOPICS, 2, 7, self.create_topics)
        server.register(DELETE_TOPICS, 1, 6, self.delete_topics)
        server.register(INCREMENTAL_ALTER_CONFIGS, 0, 1, self.incremental_alter_configs)
        self.register_broker_apis(server)

    def register_broker_apis(self, server: KafkaServer) -> None:
        server.register(BROKER_REGISTRATION, 0, 3, self.broker_registration)
        server.register(BROKER_HEARTBEAT, 0, 1, self.broker_heartbeat)

    def start(self) -> None:
        self._expiry_task = asyncio.create_task(self._expire_sessions())

    def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()

    # ---------------------------------------------------------------- submitting

    def _submit(self, operation: Callable[[MetadataImage], ControllerResult]) -> Pending:
        """Runs the operation as one core step (so its records go out at once)."""
        box: list[Pending] = []
        self.node.step(lambda core, now: box.append(self.node.controller.submit(operation, now)))
        if not box:
            raise NotControllerError(None, -1, ": the node has stopped")
        return box[0]

    async def _committed(self, pending: Pending, timeout_ms: float) -> Any:
        """The operation's response once committed; raises NotControllerError or TimeoutError."""
        started = time.monotonic()
        if not pending.done:
            future = asyncio.get_running_loop().create_future()
            pending.add_done_callback(lambda p: future.done() or future.set_result(None))
            await asyncio.wait_for(future, max(timeout_ms, 1) / 1000)
        elapsed_ms = (time.monotonic() - started) * 1000
        self.node.metrics.commit_latency_ms.observe(elapsed_ms)
        self.node.metrics.raft.commit_latency_ms.record(elapsed_ms)
        return pending.result()

    def _validate_only(self, operation: Callable[[MetadataImage], ControllerResult]) -> Any:
        if not self.node.controller.active:
            raise NotControllerError(self.node.core.leader_id if self.node.core else None, -1)
        return operation(self.node.controller.working_image).response

    async def _run(self, operation: Callable[[MetadataImage], ControllerResult], timeout_ms: float,
                   validate_only: bool = False) -> Any:
        if validate_only:
            return self._validate_only(operation)
        return await self._committed(self._submit(operation), timeout_ms)

    # ---------------------------------------------------------------- topics

    async def create_topics(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        wanted: list[ctl.NewTopic | Refusal] = []
        for t in request.topics:
            if t.assignments:
                wanted.append(Refusal(ErrorCode.invalid_request, "manual replica assignment is not supported"))
                continue
            wanted.append(ctl.NewTopic(
                t.name,
                DEFAULT_PARTITIONS if t.num_partitions == -1 else t.num_partitions,
                DEFAULT_REPLICATION_FACTOR if t.replication_factor == -1 else t.replication_factor,
                {c.name: c.value for c in t.configs},  # a null value is the controller's INVALID_CONFIG
            ))
        topics = [w for w in wanted if isinstance(w, ctl.NewTopic)]
        outcomes: list[Any]
        try:
            created = await self._run(lambda im: ctl.create_topics(im, topics, self.rng),
                                      request.timeout.total_seconds() * 1000, request.validate_only)
            results = iter(created)
            outcomes = [w if isinstance(w, Refusal) else next(results) for w in wanted]
        except ControllerError as e:  # the request as a whole (too many records for one operation)
            outcomes = [e] * len(wanted)
        except NotControllerError as e:
            outcomes = [Refusal(ErrorCode.not_controller, str(e))] * len(wanted)
        except TimeoutError:
            outcomes = [Refusal(ErrorCode.request_timed_out, "the records were not committed in time")] * len(wanted)
        entries = []
        for t, outcome in zip(request.topics, outcomes, strict=True):
            entry: dict[str, Any] = {"name": t.name, "topic_id": None, "error_code": ErrorCode.none,
                                     "error_message": None, "configs": None}
            if isinstance(outcome, Refusal | ControllerError):
                entry["error_code"] = outcome.error if isinstance(outcome, Refusal) else _code(outcome)
                entry["error_message"] = outcome.message
            else:
                entry["topic_id"] = uuid.UUID(bytes=outcome.topic_id)
                entry["num_partitions"] = len(outcome.assignment)
                entry["replication_factor"] = len(outcome.assignment[0]) if outcome.assignment else -1
                entry["configs"] = []
            entries.append(entry)
        return build_response(CREATE_TOPICS, version, {"throttle_time": timedelta(0), "topics": entries})

    async def delete_topics(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        if version >= 6:
            names = []
            for t in request.topics:
                name = t.name
                if name is None and t.topic_id is not None:
                    topic = self.node.controller.working_image.topics_by_id.get(t.topic_id.bytes)
                    name = topic.name if topic is not None else f"<unknown id {t.topic_id}>"
                names.append(name)
        else:
            names = list(request.topic_names)
        try:
            outcomes: list[Any] = await self._run(lambda im: ctl.delete_topics(im, names),
                                                  request.timeout.total_seconds() * 1000)
        except ControllerError as e:  # the request as a whole (too many records for one operation)
            outcomes = [e] * len(names)
        except NotControllerError as e:
            outcomes = [Refusal(ErrorCode.not_controller, str(e))] * len(names)
        except TimeoutError:
            outcomes = [Refusal(ErrorCode.request_timed_out, "the records were not committed in time")] * len(names)
        entries = []
        for name, outcome in zip(names, outcomes, strict=True):
            entry: dict[str, Any] = {"name": name, "topic_id": None, "error_code": ErrorCode.none, "error_message": None}
            if isinstance(outcome, bytes):
                entry["topic_id"] = uuid.UUID(bytes=outcome)
            else:
                entry["error_code"] = outcome.error if isinstance(outcome, Refusal) else _code(outcome)
                entry["error_message"] = outcome.message
            entries.append(entry)
        return build_response(DELETE_TOPICS, version, {"throttle_time": timedelta(0), "responses": entries})

    # ---------------------------------------------------------------- configs

    async def incremental_alter_configs(self, header: Any, request: Any) -> Any:
        entries = []
        for resource in request.resources:
            entry = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                     "error_code": ErrorCode.none, "error_message": None}
            try:
                target = ConfigResource(ConfigResourceType(resource.resource_type), resource.resource_name)
                ops = [AlterConfigOp(c.name, OpType(c.config_operation), c.value) for c in resource.configs]
            except ValueError as e:
                entry.update(error_code=ErrorCode.invalid_request, error_message=str(e))
                entries.append(entry)
                continue
            try:
                await self._run(lambda im, target=target, ops=ops: ctl.alter_configs(im, target, ops), 30_000,
                                request.validate_only)
            except ControllerError as e:
                entry.update(error_code=_code(e), error_message=e.message)
            except NotControllerError as e:
                entry.update(error_code=ErrorCode.not_controller, error_message=str(e))
            except TimeoutError:
                entry.update(error_code=ErrorCode.request_timed_out, error_message="not committed in time")
            entries.append(entry)
        return build_response(INCREMENTAL_ALTER_CONFIGS, header.request_api_version,
                              {"throttle_time": timedelta(0), "responses": entries})

    # ---------------------------------------------------------------- brokers

    async def broker_registration(self, header: Any, request: Any) -> Any:
        def answer(error: ErrorCode, epoch: int = -1) -> Any:
            return build_response(BROKER_REGISTRATION, header.request_api_version,
                                  {"throttle_time": timedelta(0), "error_code": error, "broker_epoch": epoch})

        if request.cluster_id != self.node.cluster_id:
            return answer(ErrorCode.inconsistent_cluster_id)
        endpoints = tuple(BrokerEndpoint(lst.name, lst.host, lst.port, lst.security_protocol) for lst in request.listeners)
        incarnation = request.incarnation_id.bytes if request.incarnation_id else bytes(16)
        controller = self.node.controller
        if self._impersonates(request.broker_id, incarnation):
            return answer(ErrorCode.duplicate_broker_registration)
        try:
            epoch = await self._run(
                lambda im: ctl.register_broker(im, request.broker_id, incarnation_id=incarnation,
                                               broker_epoch=controller.next_offset(), endpoints=endpoints,
                                               rack=request.rack),
                10_000,
            )
        except ControllerError as e:
            return answer(_code(e))
        except NotControllerError:
            return answer(ErrorCode.not_controller)
        except TimeoutError:
            return answer(ErrorCode.request_timed_out)
        self._heartbeats[request.broker_id] = time.monotonic()
        log.info("broker %d registered with epoch %d (fenced until it catches up)", request.broker_id, epoch)
        return answer(ErrorCode.none, epoch)

    def _impersonates(self, broker_id: int, incarnation: bytes) -> bool:
        """A registration under another incarnation of a broker whose session is live, which
        Kafka refuses (DUPLICATE_BROKER_REGISTRATION, ClusterControlManager.registerBroker)
        whether or not that broker is fenced. Without it any client could fence a live broker
        with one heartbeat, then take its id: a fuzz run did exactly that to the node's own
        broker, and no topic could be created until the node registered again."""
        existing = self.node.controller.working_image.broker(broker_id)
        last = self._heartbeats.get(broker_id)
        session = self.node.config["broker.session.timeout.ms"] / 1000
        return (existing is not None and existing.incarnation_id != incarnation
                and last is not None and time.monotonic() - last < session)

    async def broker_heartbeat(self, header: Any, request: Any) -> Any:
        def answer(error: ErrorCode, caught_up: bool = False, fenced: bool = True, shut_down: bool = False) -> Any:
            return build_response(BROKER_HEARTBEAT, header.request_api_version, {
                "throttle_time": timedelta(0), "error_code": error, "is_caught_up": caught_up,
                "is_fenced": fenced, "should_shut_down": shut_down,
            })

        controller = self.node.controller
        if not controller.active:
            return answer(ErrorCode.not_controller)
        broker_id, epoch = request.broker_id, request.broker_epoch
        registration = controller.working_image.broker(broker_id)
        if registration is None:
            return answer(ErrorCode.broker_id_not_registered)
        if registration.epoch != epoch:
            return answer(ErrorCode.stale_broker_epoch)
        self._heartbeats[broker_id] = time.monotonic()
        caught_up = request.current_metadata_offset >= epoch
        try:
            if request.want_shut_down or request.want_fence:
                if not registration.fenced:
                    log.info("fencing broker %d: it asked to be fenced (shutting down: %s)", broker_id,
                             request.want_shut_down)
                    await self._run(lambda im: ctl.fence_broker(im, broker_id), 10_000)
                return answer(ErrorCode.none, caught_up, True, request.want_shut_down)
            if registration.fenced and caught_up:
                await self._run(lambda im: ctl.unfence_broker(im, broker_id, epoch), 10_000)
                log.info("unfenced broker %d (epoch %d): its metadata caught up", broker_id, epoch)
                return answer(ErrorCode.none, True, False)
            # Nothing to write: the answer reads the working image, so it goes out once what
            # that image holds is committed (an unfencing still in flight may yet fail).
            fenced = await self._run(lambda im: ControllerResult((), registration.fenced), 10_000)
        except ControllerError as e:
            return answer(_code(e))
        except NotControllerError:
            return answer(ErrorCode.not_controller)
        except TimeoutError:
            return answer(ErrorCode.request_timed_out, caught_up, registration.fenced)
        return answer(ErrorCode.none, caught_up, fenced)

    async def _expire_sessions(self) -> None:
        """The active controller fences brokers whose heartbeats stopped."""
        timeout = self.node.config["broker.session.timeout.ms"] / 1000
        while True:
            await asyncio.sleep(min(0.5, timeout / 4))
            controller = self.node.controller
            core = self.node.core
            if core is None or not controller.active:
                self._active_epoch = -1
                continue
            now = time.monotonic()
            if self._active_epoch != core.epoch:
                # A new active controller gives every broker a full session to reach it.
                self._active_epoch = core.epoch
                self._heartbeats = {b: now for b in self._heartbeats}
            for broker in list(controller.working_image.brokers.values()):
                last = self._heartbeats.setdefault(broker.id, now)
                if broker.fenced or now - last <= timeout:
                    continue
                log.warning("fencing broker %d: no heartbeat for %.1f s (broker.session.timeout.ms)", broker.id,
                            now - last)
                try:
                    self._submit(lambda im, b=broker.id: ctl.fence_broker(im, b))
                except (ControllerError, NotControllerError) as e:
                    log.info("could not fence broker %d: %s", broker.id, e)
