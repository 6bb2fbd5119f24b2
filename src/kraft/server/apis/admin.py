"""The admin requests the active controller serves: topics, partitions, configs, broker lifecycle.

Each request is validated by kraft.metadata's controller against the working image (the
committed one plus what is appended and not yet committed), its records appended through
the Raft leader in one batch, and the answer sent only when they are committed. Not the
active controller: NOT_CONTROLLER, which a node's client listener never passes on (it
forwards the request to the active controller instead: forwarding.py). The commit does not
come within the request's timeout (30 s for requests without one, or with 0, which Kafka's
controller treats as no bound on the commit): REQUEST_TIMED_OUT.

Brokers register (BrokerRegistration) and then heartbeat (BrokerHeartbeat). A registered
broker starts fenced and is unfenced once its metadata cache has caught up to its own
registration; the active controller fences any broker whose heartbeats stop for
broker.session.timeout.ms, with one small FenceBroker record.
"""

import asyncio
import functools
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from kraft.controller import NotControllerError, Pending
from kraft.metadata import ControllerError, Errors, MetadataImage, features
from kraft.metadata import operations as ctl
from kraft.metadata.configs import AlterConfigOp, OpType
from kraft.metadata.image import ConfigResource, ConfigResourceType
from kraft.metadata.operations import ControllerResult
from kraft.metadata.records import BrokerEndpoint, BrokerFeature
from kraft.protocol import ErrorCode, KafkaServer, write_answers
from kraft.protocol.build import build_response
from kraft.protocol.limits import Throttled
from kraft.protocol.regions import Encoded
from kraft.protocol.server import Handler
from kraft.raft import RaftCore
from kraft.raft.kraft_upgrade import UpgradeRefused
from kraft.security.acl import CLUSTER_NAME as CLUSTER
from kraft.security.acl import AclOperation, ResourceType
from kraft.server.apis import acl_api, features_api, quota_api, scram_api
from kraft.server.apis.context import NodeContext
from kraft.server.settings.authorization import REFUSED, top_level_refusal

log = logging.getLogger("kraft.server.admin")

CREATE_TOPICS, DELETE_TOPICS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 33, 37, 44
BROKER_REGISTRATION, BROKER_HEARTBEAT, UNREGISTER_BROKER = 62, 63, 64
DEFAULT_PARTITIONS = 1  # num.partitions
DEFAULT_REPLICATION_FACTOR = 1  # default.replication.factor
DEFAULT_TIMEOUT_MS = 30_000  # for a request without a timeout of its own (Kafka clients' request.timeout.ms)
T = TypeVar("T")



def _stepped(pending: Pending | None) -> Pending:
    if pending is None:
        raise NotControllerError(None, -1, ": the node has stopped")
    return pending

class Refusal(Exception):
    """An answer with an error code before anything was submitted."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _code(error: ControllerError) -> ErrorCode:
    return ErrorCode(int(error.error))


def _error_fields(outcome: Any) -> dict[str, Any]:
    """error_code and error_message of an item's outcome: a Refusal, a ControllerError, or
    anything else (a success)."""
    if isinstance(outcome, Refusal):
        return {"error_code": outcome.error, "error_message": outcome.message}
    if isinstance(outcome, ControllerError):
        return {"error_code": _code(outcome), "error_message": outcome.message}
    return {"error_code": ErrorCode.none, "error_message": None}


def request_timeout_ms(request: Any) -> float:
    """The request's own timeout, if it has one above 0; else DEFAULT_TIMEOUT_MS. Kafka's
    controller bounds only the wait to start an operation by it, never the commit, so
    confluent-kafka's default operation_timeout of 0 still creates the topic; here the
    commit is waited for, up to the default."""
    timeout = getattr(request, "timeout", None)
    ms = timeout.total_seconds() * 1000 if isinstance(timeout, timedelta) else 0
    return ms if ms > 0 else DEFAULT_TIMEOUT_MS


def _alter_configs_action(change: Any) -> tuple[AclOperation, ResourceType, str]:
    """ALTER_CONFIGS on the topic, or on the cluster for a broker's configs (Kafka's rule);
    `change` is (ConfigResource, what changes)."""
    resource: ConfigResource = change[0]
    if resource.type == ConfigResourceType.TOPIC:
        return AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, resource.name
    return AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER


def _resource(resource_type: int, name: str) -> ConfigResource:
    """The resource a request names; ValueError for a type Kafka does not define."""
    return ConfigResource(ConfigResourceType(resource_type), name)


def _as_list(result: ControllerResult[Any]) -> ControllerResult[list[Any]]:
    """A single operation's result as a one-item list (for `_whole`)."""
    return ControllerResult(result.records, [result.response])


class AdminApi:
    def __init__(self, node: NodeContext) -> None:
        self.node = node
        self.rng = random.Random()
        self._heartbeats: dict[int, float] = {}  # broker id -> monotonic time of its last heartbeat
        self._active_epoch = -1
        self._expiry_task: asyncio.Task | None = None
        # A refused registration is retried every 200 ms: its reason is said once, then summed up.
        self._refused_registrations = Throttled(log, f"node {node.node_id}", "broker registrations refused",
                                                window_s=30.0)
        # The writes Kafka forwards from brokers to the controller: api key -> (versions, local handler, and
        # the answer refusing every item of a request with one error).
        self.forwardable: dict[int, tuple[int, int, Handler, Callable[[Any, Any, ErrorCode, str], Any]]] = {
            CREATE_TOPICS: (2, 7, self.create_topics, self._create_topics_answer),
            DELETE_TOPICS: (1, 6, self.delete_topics, self._delete_topics_answer),
            ALTER_CONFIGS: (0, 2, self.alter_configs, self._alter_configs_answer),
            CREATE_PARTITIONS: (0, 3, self.create_partitions, self._create_partitions_answer),
            INCREMENTAL_ALTER_CONFIGS: (0, 1, self.incremental_alter_configs, self._alter_configs_answer),
            scram_api.ALTER_USER_SCRAM_CREDENTIALS: (0, 0, self.alter_user_scram_credentials, scram_api.alter_refusal),
            acl_api.CREATE_ACLS: (*acl_api.VERSIONS, self.create_acls, acl_api.create_refusal),
            acl_api.DELETE_ACLS: (*acl_api.VERSIONS, self.delete_acls, acl_api.delete_refusal),
            quota_api.ALTER_CLIENT_QUOTAS: (*quota_api.VERSIONS, self.alter_client_quotas, quota_api.alter_refusal),
            UNREGISTER_BROKER: (0, 0, self.unregister_broker, self._unregister_broker_answer),
            features_api.UPDATE_FEATURES: (*features_api.VERSIONS, self.update_features, features_api.response),
        }

    def register(self, server: KafkaServer) -> None:
        """The forwardable writes, answered here: on the controller listener, where Kafka's
        controllers serve them to admin clients that bootstrap from controllers (KIP-919)."""
        for key, (low, high, handler, _) in self.forwardable.items():
            server.register(key, low, high, handler)

    def register_reads(self, server: KafkaServer) -> None:
        """What any node answers from its own image, on either listener."""
        server.register(scram_api.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, self.describe_user_scram_credentials)
        server.register(acl_api.DESCRIBE_ACLS, *acl_api.VERSIONS, self.describe_acls)
        server.register(quota_api.DESCRIBE_CLIENT_QUOTAS, *quota_api.VERSIONS, self.describe_client_quotas)

    def register_broker_apis(self, server: KafkaServer) -> None:
        server.register(BROKER_REGISTRATION, 0, 3, self.broker_registration)
        server.register(BROKER_HEARTBEAT, 0, 1, self.broker_heartbeat)

    def refusal(self, header: Any, request: Any, error: ErrorCode, message: str) -> Any:
        """The request's answer with every item refused by `error` (a forwarded request that
        could not reach the controller in time)."""
        return self.forwardable[header.request_api_key][3](header, request, error, message)

    def start(self) -> None:
        self._expiry_task = asyncio.create_task(self._expire_sessions())

    def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()

    # ---------------------------------------------------------------- submitting

    def _submit(self, operation: Callable[[MetadataImage], ControllerResult]) -> Pending:
        """Runs the operation as one core step (so its records go out at once)."""
        controller = self.node.controller
        return _stepped(self.node.step(lambda core, now: controller.submit(operation, now)))

    async def _submit_together(self, operation: Callable[[MetadataImage], ControllerResult]) -> Pending:
        """`_submit` for a client's request: the requests of one turn of the loop share a step."""
        controller = self.node.controller
        return _stepped(await self.node.step_together(lambda core, now: controller.submit(operation, now)))

    async def _committed(self, pending: Pending, timeout_ms: float) -> Any:
        """The operation's response once committed; raises NotControllerError or TimeoutError."""
        started = time.monotonic()
        if not pending.done:
            future = asyncio.get_running_loop().create_future()

            def wake(_: Pending) -> None:
                if not future.done():
                    future.set_result(None)

            pending.add_done_callback(wake)
            async with asyncio.timeout(max(timeout_ms, 1) / 1000):  # woken in one turn of the loop, as wait_for is not
                await future
        elapsed_ms = (time.monotonic() - started) * 1000
        self.node.metrics.commit_latency_ms.observe(elapsed_ms)
        self.node.metrics.raft.commit_latency_ms.record(elapsed_ms)
        return pending.result()

    def _validate_only(self, operation: Callable[[MetadataImage], ControllerResult]) -> Any:
        if not self.node.controller.active:
            raise NotControllerError(self.node.leader_id, -1)
        return operation(self.node.controller.working_image).response

    async def _run(self, operation: Callable[[MetadataImage], ControllerResult], timeout_ms: float,
                   validate_only: bool = False) -> Any:
        if validate_only:
            return self._validate_only(operation)
        return await self._committed(await self._submit_together(operation), timeout_ms)

    async def _per_item(self, wanted: Sequence[T | Refusal],
                        operation: Callable[[MetadataImage, list[T]], ControllerResult[list[Any]]],
                        timeout_ms: float, validate_only: bool = False) -> list[Any]:
        """Each item's outcome: the Refusals given, and for the rest what one operation over
        all of them answers per item; a failure of the whole operation (too many records,
        leadership lost, no commit in time) is every such item's."""
        items = [w for w in wanted if not isinstance(w, Refusal)]
        outcomes = await self._settled(self._run(lambda im: operation(im, items), timeout_ms, validate_only))
        given = iter([outcomes] * len(items) if isinstance(outcomes, ControllerError | Refusal) else outcomes)
        return [w if isinstance(w, Refusal) else next(given) for w in wanted]

    @staticmethod
    async def _settled(run: Awaitable[T]) -> T | ControllerError | Refusal:
        """What `run` gives, or why the operation failed as a whole: the controller's refusal
        (too many records, say), NOT_CONTROLLER (leadership lost), or no commit in time."""
        try:
            return await run
        except ControllerError as e:
            return e
        except NotControllerError as e:
            return Refusal(ErrorCode.not_controller, str(e))
        except TimeoutError:
            return Refusal(ErrorCode.request_timed_out, "the records were not committed in time")

    def _authorized(self, wanted: Sequence[T | Refusal], *actions: Callable[[T], tuple[AclOperation, ResourceType, str]]
                    ) -> list[T | Refusal]:
        """Each item for which the request's principal may take none of `actions` becomes a
        Refusal (TOPIC_ or CLUSTER_AUTHORIZATION_FAILED, by the first action's resource)."""
        authorization = self.node.authorization
        if not authorization.enabled:
            return list(wanted)
        decided: list[T | Refusal] = []
        for item in wanted:
            if isinstance(item, Refusal) or any(authorization.allowed(*act(item)) for act in actions):
                decided.append(item)
                continue
            resource = actions[0](item)[1]
            decided.append(Refusal(ErrorCode.topic_authorization_failed if resource == ResourceType.TOPIC
                                   else ErrorCode.cluster_authorization_failed, REFUSED))
        return decided

    # ---------------------------------------------------------------- topics

    async def create_topics(self, header: Any, request: Any) -> Any:
        wanted: list[ctl.NewTopic | Refusal] = []
        for t in request.topics:
            configs = {c.name: c.value for c in t.configs}  # a null value is the controller's INVALID_CONFIG
            if t.assignments:  # the counts as asked: the controller refuses any but -1
                wanted.append(ctl.NewTopic(t.name, t.num_partitions, t.replication_factor, configs, tuple(
                    (a.partition_index, tuple(a.broker_ids)) for a in t.assignments)))
                continue
            wanted.append(ctl.NewTopic(
                t.name,
                DEFAULT_PARTITIONS if t.num_partitions == -1 else t.num_partitions,
                DEFAULT_REPLICATION_FACTOR if t.replication_factor == -1 else t.replication_factor,
                configs,
            ))
        wanted = self._authorized(wanted, lambda t: (AclOperation.CREATE, ResourceType.TOPIC, t.name),
                                  lambda t: (AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER))
        outcomes = await self._per_item(wanted, lambda im, topics: ctl.create_topics(im, topics, self.rng),
                                        request_timeout_ms(request), request.validate_only)
        return self._create_topics_response(header, request, outcomes)

    @staticmethod
    def _create_topics_response(header: Any, request: Any, outcomes: Sequence[Any]) -> Any:
        entries = []
        for t, outcome in zip(request.topics, outcomes, strict=True):
            entry: dict[str, Any] = {"name": t.name, "topic_id": None, "configs": None, **_error_fields(outcome)}
            if isinstance(outcome, ctl.CreatedTopic):
                entry["topic_id"] = uuid.UUID(bytes=outcome.topic_id)
                entry["num_partitions"] = len(outcome.assignment)
                entry["replication_factor"] = len(outcome.assignment[0]) if outcome.assignment else -1
                entry["configs"] = []
            entries.append(entry)
        return build_response(CREATE_TOPICS, header.request_api_version,
                              {"throttle_time": timedelta(0), "topics": entries})

    def _create_topics_answer(self, header: Any, request: Any, error: ErrorCode, message: str) -> Any:
        return self._create_topics_response(header, request, [Refusal(error, message)] * len(request.topics))

    async def delete_topics(self, header: Any, request: Any) -> Any:
        names = self._deleted_names(header, request)
        wanted = self._authorized(names, lambda name: (AclOperation.DELETE, ResourceType.TOPIC, name))
        outcomes = await self._per_item(wanted, ctl.delete_topics, request_timeout_ms(request))
        return self._delete_topics_response(header, names, outcomes)

    def _deleted_names(self, header: Any, request: Any) -> list[str]:
        if header.request_api_version < 6:
            return list(request.topic_names)
        names = []
        for t in request.topics:
            name = t.name
            if name is None and t.topic_id is not None:
                topic = self.node.controller.working_image.topics_by_id.get(t.topic_id.bytes)
                name = topic.name if topic is not None else f"<unknown id {t.topic_id}>"
            names.append(name)
        return names

    @staticmethod
    def _delete_topics_response(header: Any, names: Sequence[str], outcomes: Sequence[Any]) -> Any:
        entries = []
        for name, outcome in zip(names, outcomes, strict=True):
            topic_id = uuid.UUID(bytes=outcome) if isinstance(outcome, bytes) else None
            entries.append({"name": name, "topic_id": topic_id, **_error_fields(outcome)})
        return build_response(DELETE_TOPICS, header.request_api_version,
                              {"throttle_time": timedelta(0), "responses": entries})

    def _delete_topics_answer(self, header: Any, request: Any, error: ErrorCode, message: str) -> Any:
        names = self._deleted_names(header, request)
        return self._delete_topics_response(header, names, [Refusal(error, message)] * len(names))

    async def create_partitions(self, header: Any, request: Any) -> Any:
        wanted: list[ctl.NewPartitions | Refusal] = [
            ctl.NewPartitions(t.name, t.count,
                              None if t.assignments is None else tuple(tuple(a.broker_ids) for a in t.assignments))
            for t in request.topics
        ]
        wanted = self._authorized(wanted, lambda t: (AclOperation.ALTER, ResourceType.TOPIC, t.name))
        outcomes = await self._per_item(wanted, lambda im, new: ctl.create_partitions(im, new, self.rng),
                                        request_timeout_ms(request), request.validate_only)
        return self._create_partitions_response(header, request, outcomes)

    @staticmethod
    def _create_partitions_response(header: Any, request: Any, outcomes: Sequence[Any]) -> Any:
        results = [{"name": t.name, **_error_fields(outcome)}
                   for t, outcome in zip(request.topics, outcomes, strict=True)]
        return build_response(CREATE_PARTITIONS, header.request_api_version,
                              {"throttle_time": timedelta(0), "results": results})

    def _create_partitions_answer(self, header: Any, request: Any, error: ErrorCode, message: str) -> Any:
        return self._create_partitions_response(header, request, [Refusal(error, message)] * len(request.topics))

    # ---------------------------------------------------------------- configs

    async def incremental_alter_configs(self, header: Any, request: Any) -> Any:
        """IncrementalAlterConfigs: every resource in one operation, answered per resource."""
        wanted: list[tuple[ConfigResource, list[AlterConfigOp]] | Refusal] = []
        for r in request.resources:
            try:
                ops = [AlterConfigOp(c.name, OpType(c.config_operation), c.value) for c in r.configs]
                wanted.append((_resource(r.resource_type, r.resource_name), ops))
            except ValueError as e:
                wanted.append(Refusal(ErrorCode.invalid_request, str(e)))
        outcomes = await self._per_item(self._authorized(wanted, _alter_configs_action), ctl.alter_configs_each,
                                        request_timeout_ms(request), request.validate_only)
        return self._alter_configs_response(header, request, outcomes)

    async def alter_configs(self, header: Any, request: Any) -> Any:
        """Legacy AlterConfigs: each resource's configs become exactly those named (Kafka's
        whole-set semantics: a config not named is removed). A null value is refused as
        Kafka's broker refuses it, before the controller sees the request."""
        wanted: list[tuple[ConfigResource, dict[str, str]] | Refusal] = []
        for r in request.resources:
            names = [c.name for c in r.configs]
            nulls = [c.name for c in r.configs if c.value is None]
            if len(set(names)) != len(names):
                wanted.append(Refusal(ErrorCode.invalid_request, "Error due to duplicate config keys"))
            elif nulls:
                wanted.append(Refusal(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}"))
            else:
                try:
                    wanted.append((_resource(r.resource_type, r.resource_name), {c.name: c.value for c in r.configs}))
                except ValueError:
                    wanted.append(Refusal(ErrorCode.invalid_request, f"Unknown resource type {r.resource_type}"))
        outcomes = await self._per_item(self._authorized(wanted, _alter_configs_action), ctl.replace_configs_each,
                                        request_timeout_ms(request), request.validate_only)
        return self._alter_configs_response(header, request, outcomes)

    @staticmethod
    def _alter_configs_response(header: Any, request: Any, outcomes: Sequence[Any]) -> Encoded:
        """AlterConfigs' and IncrementalAlterConfigs' answers have the same fields (written as
        bytes: one is every config write's answer)."""
        entries = [(fields["error_code"], fields["error_message"], r.resource_type, r.resource_name)
                   for r, fields in zip(request.resources, map(_error_fields, outcomes), strict=True)]
        return write_answers.alter_configs(header.request_api_key, header.request_api_version, entries)

    def _alter_configs_answer(self, header: Any, request: Any, error: ErrorCode, message: str) -> Any:
        return self._alter_configs_response(header, request, [Refusal(error, message)] * len(request.resources))

    # ---------------------------------------------------------------- SCRAM credentials (scram_api.py)

    async def alter_user_scram_credentials(self, header: Any, request: Any) -> Any:
        if not self.node.authorization.allowed(AclOperation.ALTER):
            return scram_api.alter_refusal(header, request, ErrorCode.cluster_authorization_failed, REFUSED)
        deletions, upsertions = scram_api.alter_request(request)
        outcomes = await self._settled(self._run(lambda im: scram_api.alter_credentials(im, deletions, upsertions),
                                                 DEFAULT_TIMEOUT_MS))
        if isinstance(outcomes, ControllerError | Refusal):
            fields = _error_fields(outcomes)
            return scram_api.alter_refusal(header, request, fields["error_code"], fields["error_message"])
        return scram_api.alter_response(header, outcomes)

    async def describe_user_scram_credentials(self, header: Any, request: Any) -> Any:
        if not self.node.authorization.allowed(AclOperation.DESCRIBE):
            return top_level_refusal(scram_api.DESCRIBE_USER_SCRAM_CREDENTIALS, header.request_api_version,
                                     ErrorCode.cluster_authorization_failed, REFUSED)
        return scram_api.describe(self.node.image, header, request)

    # ---------------------------------------------------------------- client quotas (quota_api.py)

    async def alter_client_quotas(self, header: Any, request: Any) -> Any:
        if not self.node.authorization.allowed(AclOperation.ALTER_CONFIGS):
            return quota_api.alter_refusal(header, request, ErrorCode.cluster_authorization_failed, REFUSED)
        alterations = quota_api.alter_request(request)
        outcomes = await self._whole(lambda im: quota_api.alter_quotas(im, alterations), len(alterations),
                                     request.validate_only)
        return quota_api.alter_response(header, request, [
            (o.error, o.message) if isinstance(o, Refusal) else o for o in outcomes])

    async def describe_client_quotas(self, header: Any, request: Any) -> Any:
        if not self.node.authorization.allowed(AclOperation.DESCRIBE_CONFIGS):
            return quota_api.describe_refusal(header, ErrorCode.cluster_authorization_failed, REFUSED)
        return quota_api.describe(self.node.image, header, request)

    # ---------------------------------------------------------------- UpdateFeatures (features_api.py)

    async def update_features(self, header: Any, request: Any) -> Any:
        """Kafka's rule: ALTER on the cluster. Every update is checked first, kraft.version's
        upgrade by the Raft core without writing; only then is anything appended, in one
        core step: kraft.version's control batch, then the features' records."""
        if not self.node.authorization.allowed(AclOperation.ALTER):
            return features_api.response(header, request, ErrorCode.cluster_authorization_failed, REFUSED)
        updates = features_api.requested(header, request)
        outcome = await self._settled(self._features_updated(updates, request.validate_only,
                                                             request_timeout_ms(request)))
        if isinstance(outcome, ControllerError):
            return features_api.refused(header, request, _code(outcome), outcome.message)
        return features_api.response(header, request, **_error_fields(outcome))

    async def _features_updated(self, updates: list[features.FeatureUpdate], validate_only: bool,
                                timeout_ms: float) -> None:
        pending = self.node.step(lambda core, now: self._update_features(core, now, updates, validate_only))
        if pending is None:
            raise NotControllerError(None, -1, ": the node has stopped")
        await self._committed(pending, timeout_ms)

    def _update_features(self, core: RaftCore, now: int, updates: list[features.FeatureUpdate],
                         validate_only: bool) -> Pending:
        controller = self.node.controller
        if not controller.active:
            raise NotControllerError(core.leader_id, core.epoch)

        def operation(image: MetadataImage, validate: bool) -> ControllerResult[None]:
            def upgrade_kraft(level: int) -> None:
                try:
                    core.upgrade_kraft_version(level, validate, now)
                except UpgradeRefused as e:
                    raise ControllerError(Errors.INVALID_UPDATE_VERSION, str(e)) from None
            return features.update_features(image, updates, node_id=self.node.node_id,
                                            kraft_version=core.voters.kraft_version, upgrade_kraft=upgrade_kraft)

        operation(controller.working_image, True)
        if validate_only:
            return Pending.resolved(None)
        return controller.submit(lambda image: operation(image, False), now)

    # ---------------------------------------------------------------- UnregisterBroker (kafka-cluster)

    async def unregister_broker(self, header: Any, request: Any) -> Any:
        """Kafka's rule: ALTER on the cluster; the registration's removal is committed before
        the answer. A broker still running registers again at its next heartbeat."""
        if not self.node.authorization.allowed(AclOperation.ALTER):
            return self._unregister_broker_answer(header, request, ErrorCode.cluster_authorization_failed, REFUSED)
        outcome = (await self._whole(lambda im: _as_list(ctl.unregister_broker(im, request.broker_id)), 1))[0]
        return self._unregister_broker_answer(header, request, **_error_fields(outcome))

    @staticmethod
    def _unregister_broker_answer(header: Any, request: Any, error_code: ErrorCode, error_message: str | None) -> Any:
        return build_response(UNREGISTER_BROKER, header.request_api_version, {
            "throttle_time": timedelta(0), "error_code": error_code, "error_message": error_message})

    # ---------------------------------------------------------------- ACLs (acl_api.py)

    async def create_acls(self, header: Any, request: Any) -> Any:
        if not self.node.authorization.enabled:
            return acl_api.create_refusal(header, request, ErrorCode.security_disabled, acl_api.NO_AUTHORIZER)
        if not self.node.authorization.allowed(AclOperation.ALTER):
            return acl_api.create_refusal(header, request, ErrorCode.cluster_authorization_failed, REFUSED)
        acls = acl_api.creations(request)
        return acl_api.create_response(header, await self._whole(
            lambda im: acl_api.create_acls(im, acls), len(acls)))

    async def delete_acls(self, header: Any, request: Any) -> Any:
        if not self.node.authorization.enabled:
            return acl_api.delete_refusal(header, request, ErrorCode.security_disabled, acl_api.NO_AUTHORIZER)
        if not self.node.authorization.allowed(AclOperation.ALTER):
            return acl_api.delete_refusal(header, request, ErrorCode.cluster_authorization_failed, REFUSED)
        filters = [acl_api.filter_of(f) for f in request.filters]
        return acl_api.delete_response(header, await self._whole(
            lambda im: acl_api.delete_acls(im, filters), len(filters)))

    async def describe_acls(self, header: Any, request: Any) -> Any:
        if not self.node.authorization.enabled:
            return acl_api.describe_refusal(header, ErrorCode.security_disabled, acl_api.NO_AUTHORIZER_DESCRIBE)
        if not self.node.authorization.allowed(AclOperation.DESCRIBE):
            return acl_api.describe_refusal(header, ErrorCode.cluster_authorization_failed, REFUSED)
        return acl_api.describe(self.node.image, header, request)

    async def _whole(self, operation: Callable[[MetadataImage], ControllerResult[list[Any]]], items: int,
                     validate_only: bool = False) -> list[Any]:
        """An operation answered per item, whose failure as a whole is every item's."""
        outcomes = await self._settled(self._run(operation, DEFAULT_TIMEOUT_MS, validate_only))
        return [outcomes] * items if isinstance(outcomes, ControllerError | Refusal) else outcomes

    # ---------------------------------------------------------------- brokers

    async def broker_registration(self, header: Any, request: Any) -> Any:
        def answer(error: ErrorCode, epoch: int = -1) -> Any:
            return build_response(BROKER_REGISTRATION, header.request_api_version,
                                  {"throttle_time": timedelta(0), "error_code": error, "broker_epoch": epoch})

        if request.cluster_id != self.node.cluster_id:
            return answer(ErrorCode.inconsistent_cluster_id)
        endpoints = tuple(BrokerEndpoint(name=lst.name, host=lst.host, port=lst.port,
                                         security_protocol=lst.security_protocol) for lst in request.listeners)
        supported = tuple(BrokerFeature(name=f.name, min_supported_version=f.min_supported_version,
                                        max_supported_version=f.max_supported_version) for f in request.features)
        incarnation = request.incarnation_id.bytes if request.incarnation_id else bytes(16)
        controller = self.node.controller
        if self._impersonates(request.broker_id, incarnation):
            return answer(ErrorCode.duplicate_broker_registration)
        try:
            epoch = await self._run(
                lambda im: ctl.register_broker(im, request.broker_id, incarnation_id=incarnation,
                                               broker_epoch=controller.next_offset(), endpoints=endpoints,
                                               features=supported, rack=request.rack,
                                               kraft_version=self.node.kraft_version),
                10_000,
            )
        except ControllerError as e:
            # BrokerRegistrationResponse has no message field: the reason goes to the log.
            self._refused_registrations.event("broker %d registration refused: %s", request.broker_id, e.message)
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
        session = self.node.config.broker_session_timeout_ms / 1000
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
        timeout = self.node.config.broker_session_timeout_ms / 1000
        while True:
            await asyncio.sleep(min(0.5, timeout / 4))
            controller = self.node.controller
            if not controller.active:
                self._active_epoch = -1
                continue
            now = time.monotonic()
            if self._active_epoch != self.node.epoch:
                # A new active controller gives every broker a full session to reach it.
                self._active_epoch = self.node.epoch
                self._heartbeats = {b: now for b in self._heartbeats}
            for broker in list(controller.working_image.brokers.values()):
                last = self._heartbeats.setdefault(broker.id, now)
                if broker.fenced or now - last <= timeout:
                    continue
                log.warning("fencing broker %d: no heartbeat for %.1f s (broker.session.timeout.ms)", broker.id,
                            now - last)
                try:
                    self._submit(functools.partial(ctl.fence_broker, broker_id=broker.id))
                except (ControllerError, NotControllerError) as e:
                    log.info("could not fence broker %d: %s", broker.id, e)
