"""server.properties: Kafka's names, Kafka's defaults, strict checking of what kraft uses.

A stock Kafka server.properties starts kraft: keys kraft does not use (num.io.threads,
log.retention.hours...) are listed once, in one warning line, with a guess when a key looks
like a misspelt key of kraft's. Every key kraft does use must parse, or start-up stops with
a message naming the key. Kafka's fallbacks and aliases hold: `log.dirs` (then `log.dir`)
when there is no `metadata.log.dir`, `broker.id` for `node.id`, `inter.broker.listener.name`
choosing the client listener, `advertised.listeners` what brokers register, and
`listener.security.protocol.map` naming each listener's protocol. The security keys (ssl.*,
sasl.*, and their `listener.name.<name>.` overrides) are read by security_config.py. Keys
that only kraft has start with `kraft.`.
"""

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from kraft.protocol.limits import INT32_MAX, ListenerLimits
from kraft.records.control import VoterEndpoint
from kraft.security.jaas import JaasEntry
from kraft.security.tls import TlsConfigError, TlsSettings
from kraft.server.settings import security_config as sec


class ConfigError(ValueError):
    """A server.properties problem, naming the key (and the file, when there is one)."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


# max.connections on a listener with TLS or SASL when not given: an idle TLS connection costs
# a node about 31 KB (docs/decisions/0025-listener-limits-and-fuzz.md), so 10,000 of them 310 MB
TLS_MAX_CONNECTIONS = 10_000

@dataclass(frozen=True)
class Listener:
    name: str
    endpoint: Endpoint


def _int(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            n = int(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not an integer") from None
        if low is not None and n < low:
            raise ValueError(f"{n} is below the minimum {low}")
        if high is not None and n > high:
            raise ValueError(f"{n} is above the maximum {high}")
        return n

    return parse


def _bool(value: str) -> bool:
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{value!r} is not true or false")
    return text == "true"


def _ratio(value: str) -> float:
    try:
        r = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not 0.0 <= r <= 1.0:
        raise ValueError(f"{r} is not between 0 and 1")
    return r


def _roles(value: str) -> frozenset[str]:
    roles = frozenset(r.strip() for r in value.split(",") if r.strip())
    if not roles or not roles <= {"broker", "controller"}:
        raise ValueError(f"{value!r}: process.roles is broker, controller, or broker,controller")
    return roles


def _endpoint(text: str) -> Endpoint:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not host:port")
    return Endpoint(host.strip("[]") or "0.0.0.0", int(port))


def _voters(value: str) -> dict[int, Endpoint]:
    voters: dict[int, Endpoint] = {}
    for entry in (e.strip() for e in value.split(",") if e.strip()):
        node, at, address = entry.partition("@")
        if not at or not node.strip().isdigit():
            raise ValueError(f"{entry!r} is not id@host:port")
        if int(node) in voters:
            raise ValueError(f"voter {node} is listed twice")
        voters[int(node)] = _endpoint(address)
    if not voters:
        raise ValueError("no voters")
    return voters


def _bootstrap_servers(value: str) -> tuple[Endpoint, ...]:
    servers = tuple(_endpoint(e) for e in value.split(",") if e.strip())
    if not servers:
        raise ValueError("no host:port given")
    return servers


_LISTENER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(.*)$")


def _listeners(value: str) -> tuple[Listener, ...]:
    listeners = []
    for entry in (e.strip() for e in value.split(",") if e.strip()):
        match = _LISTENER.match(entry)
        if match is None:
            raise ValueError(f"{entry!r} is not NAME://host:port")
        listeners.append(Listener(match[1].upper(), _endpoint(match[2])))
    if len({listener.name for listener in listeners}) != len(listeners):
        raise ValueError("a listener name is used twice")
    return tuple(listeners)


def _protocol_map(value: str) -> dict[str, str]:
    protocols = {}
    for entry in (e.strip() for e in value.split(",") if e.strip()):
        name, colon, protocol = entry.partition(":")
        if not colon or not name.strip() or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ValueError(f"{entry!r} is not LISTENER_NAME:PROTOCOL with a protocol of {', '.join(SECURITY_PROTOCOLS)}")
        protocols[name.strip().upper()] = protocol.strip().upper()
    return protocols


def _names(value: str) -> tuple[str, ...]:
    return tuple(n.strip().upper() for n in value.split(",") if n.strip())


def _text(value: str) -> str:
    return value.strip()


DAY_MS = 24 * 3600 * 1000
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's default map: each security protocol's name maps to itself.
DEFAULT_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}

REQUIRED: Any = MISSING  # a key without a default must be given


def _key(key: str, parse: Callable[[str], Any], default: Any = REQUIRED) -> Any:
    """A server.properties key as a typed attribute of ServerConfig: its Kafka name (the
    attribute is that name with `.` and `-` as `_`), its parser and Kafka's default (an
    empty mapping is made afresh for each config, as a dataclass wants)."""
    if isinstance(default, Mapping):
        return field(default_factory=dict, metadata={"key": key, "parse": parse})
    return field(default=default, metadata={"key": key, "parse": parse})


def attribute_of(key: str) -> str:
    """The ServerConfig attribute a server.properties key is read as."""
    return key.replace(".", "_").replace("-", "_")


@dataclass(frozen=True, kw_only=True)
class ServerConfig(sec.SecurityKeys):
    """server.properties, parsed once: every key kraft uses is an attribute named after it
    (`controller.quorum.election.timeout.ms` is `controller_quorum_election_timeout_ms`),
    typed, with Kafka's default when the file does not give it."""

    node_id: int = _key("node.id", _int(0, 2**31 - 1))
    broker_id: int = _key("broker.id", _int(-1, 2**31 - 1), -1)  # Kafka's older name; must agree with node.id
    process_roles: frozenset[str] = _key("process.roles", _roles)
    # One of the two: the voters themselves (a static quorum), or where to find the leader of
    # a dynamic one (KIP-853), whose voters are in the log.
    controller_quorum_voters: Mapping[int, Endpoint] = _key("controller.quorum.voters", _voters, {})
    controller_quorum_bootstrap_servers: tuple[Endpoint, ...] = _key(
        "controller.quorum.bootstrap.servers", _bootstrap_servers, ())
    listeners: tuple[Listener, ...] = _key("listeners", _listeners)
    advertised_listeners: tuple[Listener, ...] = _key("advertised.listeners", _listeners, ())
    # empty: Kafka's default (see protocol_of())
    listener_security_protocol_map: Mapping[str, str] = _key(
        "listener.security.protocol.map", _protocol_map, {})
    inter_broker_listener_name: str = _key("inter.broker.listener.name", _text, "")
    controller_listener_names: tuple[str, ...] = _key("controller.listener.names", _names, ("CONTROLLER",))
    metadata_log_dir: str = _key("metadata.log.dir", _text, "")  # Kafka's default: the first of log.dirs
    log_dirs: str = _key("log.dirs", _text, "")
    log_dir: str = _key("log.dir", _text, "/tmp/kafka-logs")
    # the .index holds int32 positions
    metadata_log_segment_bytes: int = _key("metadata.log.segment.bytes", _int(1024, 2**31 - 1), 1024 * 1024 * 1024)
    metadata_log_segment_ms: int = _key("metadata.log.segment.ms", _int(1), 7 * DAY_MS)
    # Kafka's default is 60000; 0 keeps the recovery point exact (kraft.storage.file_log).
    log_flush_offset_checkpoint_interval_ms: int = _key("log.flush.offset.checkpoint.interval.ms", _int(0), 0)
    controller_quorum_election_timeout_ms: int = _key("controller.quorum.election.timeout.ms", _int(1), 1000)
    controller_quorum_fetch_timeout_ms: int = _key("controller.quorum.fetch.timeout.ms", _int(1), 2000)
    controller_quorum_election_backoff_max_ms: int = _key("controller.quorum.election.backoff.max.ms", _int(0), 1000)
    controller_quorum_request_timeout_ms: int = _key("controller.quorum.request.timeout.ms", _int(1), 2000)
    controller_quorum_retry_backoff_ms: int = _key("controller.quorum.retry.backoff.ms", _int(0), 20)
    controller_quorum_append_linger_ms: int = _key("controller.quorum.append.linger.ms", _int(0), 25)
    controller_quorum_auto_join_enable: bool = _key("controller.quorum.auto.join.enable", _bool, False)
    metadata_log_max_record_bytes_between_snapshots: int = _key(
        "metadata.log.max.record.bytes.between.snapshots", _int(1), 20 * 1024 * 1024)
    metadata_snapshot_min_changed_records_ratio: float = _key(
        "metadata.snapshot.min.changed_records.ratio", _ratio, 0.5)
    metadata_log_max_snapshot_interval_ms: int = _key("metadata.log.max.snapshot.interval.ms", _int(0), 3600 * 1000)
    metadata_max_retention_bytes: int = _key("metadata.max.retention.bytes", _int(-1), 100 * 1024 * 1024)
    metadata_max_retention_ms: int = _key("metadata.max.retention.ms", _int(-1), 7 * DAY_MS)
    metadata_start_offset_lag_time_max_ms: int = _key("metadata.start.offset.lag.time.max.ms", _int(0), 7 * DAY_MS)
    replica_fetch_response_max_bytes: int = _key("replica.fetch.response.max.bytes", _int(1), 10 * 1024 * 1024)
    replica_fetch_snapshot_max_bytes: int = _key("replica.fetch.snapshot.max.bytes", _int(1), 10 * 1024 * 1024)
    socket_request_max_bytes: int = _key("socket.request.max.bytes", _int(1024), 100 * 1024 * 1024)
    # Kafka's default is -1 (no limit): one request of socket.request.max.bytes beyond the
    # rest; the most a listener reserves is this plus one largest request (non-strict pool).
    queued_max_request_bytes: int = _key("queued.max.request.bytes", _int(-1), 100 * 1024 * 1024)
    # Kafka's default, no limit, holds on PLAINTEXT listeners; on one with TLS or SASL the
    # default is TLS_MAX_CONNECTIONS (kept below what the descriptor limit allows either way)
    max_connections: int = _key("max.connections", _int(1), INT32_MAX)
    max_connections_per_ip: int = _key("max.connections.per.ip", _int(1), INT32_MAX)
    connections_max_idle_ms: int = _key("connections.max.idle.ms", _int(1), 600_000)
    # A request whose bytes do not all arrive within this of its first byte is dropped with
    # its connection (Kafka has no such limit; 30 s is its clients' request.timeout.ms).
    kraft_request_arrival_timeout_ms: int = _key("kraft.request.arrival.timeout.ms", _int(1), 30_000)
    # Connections in their TLS handshake or SASL login a listener holds; at the limit a new
    # one closes the oldest of them (Kafka has no such limit)
    kraft_max_unauthenticated_connections: int = _key("kraft.max.unauthenticated.connections", _int(1), 1000)
    # a NoOpRecord when idle this long; 0: never
    metadata_max_idle_interval_ms: int = _key("metadata.max.idle.interval.ms", _int(0), 500)
    # KIP-630's fencing events instead of Kafka's partition changes, for a log bootstrapped here
    kraft_metadata_derived_fencing: bool = _key("kraft.metadata.derived.fencing", _bool, False)
    # Consumer groups (kraft.groups): Kafka's names and defaults, but for the number of
    # __consumer_offsets partitions (Kafka: 50), each a Raft log of its own here.
    offsets_topic_num_partitions: int = _key("offsets.topic.num.partitions", _int(1, 1000), 3)
    # The metadata partition's leader hands the offsets partitions it leads to other voters
    # (kraft.server.runtime.leadership_balance), as Kafka spreads partition leadership
    auto_leader_rebalance_enable: bool = _key("auto.leader.rebalance.enable", _bool, True)
    offsets_commit_timeout_ms: int = _key("offsets.commit.timeout.ms", _int(1), 5000)
    offset_metadata_max_bytes: int = _key("offset.metadata.max.bytes", _int(0), 4096)
    group_min_session_timeout_ms: int = _key("group.min.session.timeout.ms", _int(0), 6000)
    group_max_session_timeout_ms: int = _key("group.max.session.timeout.ms", _int(0), 1_800_000)
    group_initial_rebalance_delay_ms: int = _key("group.initial.rebalance.delay.ms", _int(0), 3000)
    group_max_size: int = _key("group.max.size", _int(1), INT32_MAX)
    broker_session_timeout_ms: int = _key("broker.session.timeout.ms", _int(1), 9000)
    broker_heartbeat_interval_ms: int = _key("broker.heartbeat.interval.ms", _int(1), 2000)
    # Prometheus endpoint; 0 picks a free port, -1 turns it off
    kraft_metrics_port: int = _key("kraft.metrics.port", _int(-1, 65535), 0)
    kraft_metrics_host: str = _key("kraft.metrics.host", _text, "127.0.0.1")

    source: str = "<config>"
    unused: tuple[str, ...] = ()  # keys given that kraft does not use (warned about once)
    # listener.name.<name>.<key> overrides: (LISTENER, key) -> parsed value
    overrides: Mapping[tuple[str, str], Any] = field(default_factory=dict)

    @property
    def voters(self) -> Mapping[int, Endpoint]:
        return self.controller_quorum_voters

    @property
    def bootstrap_servers(self) -> tuple[Endpoint, ...]:
        return self.controller_quorum_bootstrap_servers

    @property
    def is_voter(self) -> bool:
        """A controller: a voter, or (KIP-853) one that may become a voter."""
        return "controller" in self.process_roles

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    def listener_limits(self, listener: str) -> ListenerLimits:
        """The limits `listener` keeps (each listener its own, as a combined Kafka node's
        broker and controller socket servers each have theirs). max.connections left at
        Kafka's default (no limit) is TLS_MAX_CONNECTIONS on a listener with TLS or SASL."""
        secured = self.protocol_of(listener) != "PLAINTEXT"
        return ListenerLimits(
            max_connections=TLS_MAX_CONNECTIONS if secured and self.max_connections == INT32_MAX
            else self.max_connections,
            max_connections_per_ip=self.max_connections_per_ip,
            queued_max_request_bytes=self.queued_max_request_bytes,
            connections_max_idle_ms=self.connections_max_idle_ms,
            request_arrival_timeout_ms=self.kraft_request_arrival_timeout_ms,
            max_unauthenticated_connections=self.kraft_max_unauthenticated_connections,
        )

    @property
    def data_dirs(self) -> list[str]:
        """log.dirs (or log.dir): the data directories Kafka keeps beside the metadata one."""
        dirs = [d.strip() for d in self.log_dirs.split(",") if d.strip()]
        return dirs or [self.log_dir]

    @property
    def metadata_dir(self) -> Path:
        """metadata.log.dir, else the first of log.dirs, else log.dir, as Kafka chooses."""
        return Path(self.metadata_log_dir or self.data_dirs[0])

    def listener(self, name: str) -> Listener | None:
        return next((lst for lst in self.listeners if lst.name == name), None)

    @property
    def controller_listener(self) -> Listener | None:
        for name in self.controller_listener_names:
            found = self.listener(name)
            if found is not None:
                return found
        return None

    @property
    def client_listener(self) -> Listener | None:
        """inter.broker.listener.name's listener, else the first that is not a controller's."""
        if self.inter_broker_listener_name:
            return self.listener(self.inter_broker_listener_name.upper())
        names = set(self.controller_listener_names)
        return next((lst for lst in self.listeners if lst.name not in names), None)

    def advertised(self, listener: Listener) -> Endpoint:
        """Where clients reach `listener`: its advertised.listeners entry, else its own
        endpoint (an unspecified host, 0.0.0.0, is advertised as the bound address)."""
        found = next((a for a in self.advertised_listeners if a.name == listener.name), None)
        return found.endpoint if found is not None else listener.endpoint

    def protocol(self, listener: Listener) -> str:
        return self.protocol_of(listener.name)

    def protocol_of(self, name: str) -> str:
        """A listener's security protocol, as Kafka's effectiveListenerSecurityProtocolMap
        gives it: its entry in listener.security.protocol.map; without that key, each
        protocol's own name maps to itself and the controller listeners to PLAINTEXT."""
        given = self.listener_security_protocol_map
        if given:
            return given.get(name, "")
        if name in self.controller_listener_names:
            return "PLAINTEXT"
        return DEFAULT_PROTOCOL_MAP.get(name, "")

    def security_of(self, listener: str) -> sec.SecurityKeys:
        """The security keys as `listener` has them: each its listener.name.<name>.<key>
        override where given, else the node's (Kafka resolves them key by key)."""
        given = {attribute_of(key): value for (name, key), value in self.overrides.items()
                 if name == listener and key in sec.PER_LISTENER}
        return sec.SecurityKeys(**{f.name: given.get(f.name, getattr(self, f.name)) for f in fields(sec.SecurityKeys)})

    def tls_settings(self, listener: str) -> TlsSettings:
        keys = self.security_of(listener)
        return TlsSettings(
            where=f"{self.source}: listener {listener}",
            keystore_type=keys.ssl_keystore_type,
            keystore_location=keys.ssl_keystore_location,
            keystore_certificate_chain=keys.ssl_keystore_certificate_chain,
            keystore_key=keys.ssl_keystore_key,
            key_password=keys.ssl_key_password,
            truststore_type=keys.ssl_truststore_type,
            truststore_location=keys.ssl_truststore_location,
            truststore_certificates=keys.ssl_truststore_certificates,
            client_auth=keys.ssl_client_auth,
            endpoint_identification_algorithm=keys.ssl_endpoint_identification_algorithm,
        )

    def jaas(self, listener: str, mechanism: str) -> JaasEntry | None:
        """listener.name.<listener>.<mechanism>.sasl.jaas.config, parsed, if given."""
        entry: JaasEntry | None = self.overrides.get((listener, mechanism + sec.JAAS_SUFFIX))
        return entry

    def own_controller_endpoints(self) -> tuple[VoterEndpoint, ...]:
        """Where other controllers reach this one, by listener name, as a voter set records it
        (KIP-853); none if a controller listener is advertised without a host, which only the
        operator can name (--initial-controllers may give one the listener does not)."""
        found = []
        for name in self.controller_listener_names:
            listener = self.listener(name)
            if listener is None:
                continue
            endpoint = self.advertised(listener)
            if endpoint.host in ("", "0.0.0.0"):
                return ()
            found.append(VoterEndpoint(name, endpoint.host, endpoint.port))
        return tuple(found)

    @property
    def controller_listener_name(self) -> str:
        """The name this node's connections to controllers use: the first of controller.listener.names."""
        return self.controller_listener_names[0]


# server.properties key -> the ServerConfig field that holds it
KEYS: dict[str, Field[Any]] = {f.metadata["key"]: f for f in fields(ServerConfig) if "key" in f.metadata}


def parse_value(key: str, raw: str) -> Any:
    """`raw` as `key` is read (ValueError if it does not parse); KeyError for a key kraft does not use."""
    return KEYS[key].metadata["parse"](raw)


def default_of(key: str) -> Any:
    """Kafka's default for `key` (REQUIRED if it has none)."""
    declared = KEYS[key]
    return declared.default_factory() if declared.default_factory is not MISSING else declared.default


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties, the subset server.properties use: key=value or key: value lines,
    # and ! comments, blank lines, backslash line continuations."""
    entries: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match is None:
            key, value = line, ""
        else:
            key, value = match[1], match[2]
        entries[key] = value
    return entries


def load_config(entries: Mapping[str, str], source: str = "<config>") -> ServerConfig:
    """Checks every key kraft uses; raises ConfigError naming the first problem. Keys it
    does not use are kept in `unused`, for one warning line (`unused_keys_warning`)."""
    values: dict[str, Any] = {}
    unused = []
    entries = dict(entries)
    if "node.id" not in entries and "broker.id" in entries:  # Kafka takes broker.id for node.id
        entries["node.id"] = entries["broker.id"]
    overrides: dict[tuple[str, str], Any] = {}
    for key, raw in entries.items():
        try:
            if key.startswith(sec.PREFIX):
                found = sec.listener_key(key, raw)
                if found is None:
                    unused.append(key)
                else:
                    overrides[found[0]] = found[1]
            elif key in KEYS:
                values[attribute_of(key)] = parse_value(key, raw)
            else:
                unused.append(key)
        except ValueError as e:
            raise ConfigError(f"{source}: invalid value for {key}: {e}") from None
    if not values.get("controller_quorum_voters") and not values.get("controller_quorum_bootstrap_servers"):
        raise ConfigError(f"{source}: give controller.quorum.voters (id@host:port,...: a static quorum) or "
                          "controller.quorum.bootstrap.servers (host:port,...: a dynamic one, KIP-853)")
    for key, declared in KEYS.items():
        if declared.name not in values and default_of(key) is REQUIRED:
            raise ConfigError(f"{source}: required configuration key {key!r} is missing")
    config = ServerConfig(**values, source=source, unused=tuple(sorted(unused)), overrides=overrides)
    _check(config)
    return config


def unused_keys_warning(config: ServerConfig) -> str | None:
    """One line naming the keys kraft does not use, with the kraft key each misspelling
    most looks like (a typo in a timeout must not pass unseen)."""
    if not config.unused:
        return None
    names = []
    for key in config.unused:
        close = difflib.get_close_matches(key, KEYS, n=1, cutoff=0.85)
        names.append(f"{key} (did you mean {close[0]}?)" if close else key)
    return f"{config.source}: {len(names)} keys kraft does not use, ignored: {', '.join(names)}"


def _check(config: ServerConfig) -> None:
    source = config.source
    if config.broker_id >= 0 and config.broker_id != config.node_id:
        raise ConfigError(f"{source}: broker.id {config.broker_id} and node.id {config.node_id} differ; "
                          "give one of them, or the same id to both")
    for listener in config.listeners:
        protocol = config.protocol(listener)
        if not protocol:
            raise ConfigError(f"{source}: listener.security.protocol.map: no protocol for listener {listener.name}; "
                              f"add {listener.name}:PLAINTEXT")
        _check_security(config, listener.name, protocol, server=True)
    if config.inter_broker_listener_name and config.client_listener is None:
        raise ConfigError(f"{source}: inter.broker.listener.name {config.inter_broker_listener_name} "
                          "is not one of listeners")
    if config.voters and config.is_voter and config.node_id not in config.voters:
        raise ConfigError(
            f"{source}: node.id {config.node_id} has process.roles=controller but is not in controller.quorum.voters"
        )
    if not config.is_voter and config.node_id in config.voters:
        raise ConfigError(f"{source}: node.id {config.node_id} is in controller.quorum.voters but not a controller")
    if config.is_voter:
        controller = config.controller_listener
        if controller is None:
            raise ConfigError(f"{source}: listeners: no listener named in controller.listener.names")
        own = config.voters.get(config.node_id)
        if own is not None and own.port != config.advertised(controller).port and controller.endpoint.port != 0:
            raise ConfigError(
                f"{source}: controller.quorum.voters gives {own} for node {config.node_id}, "
                f"but its controller listener is {controller.endpoint}"
            )
    if config.client_listener is None:
        raise ConfigError(f"{source}: listeners: no client listener (one not in controller.listener.names)")
    if config.authorizer_class_name not in ("", sec.STANDARD_AUTHORIZER):
        raise ConfigError(f"{source}: authorizer.class.name {config.authorizer_class_name} is not served; "
                          f"kraft's is Kafka's KRaft authorizer: {sec.STANDARD_AUTHORIZER}")
    controller_name = config.controller_listener_name
    controller_protocol = config.protocol_of(controller_name)
    if not controller_protocol:
        raise ConfigError(f"{source}: listener.security.protocol.map: no protocol for the controller listener "
                          f"{controller_name}; add {controller_name}:PLAINTEXT (or SSL, SASL_SSL...)")
    _check_security(config, controller_name, controller_protocol, server=False)
    if config.controller_quorum_fetch_timeout_ms <= config.controller_quorum_election_timeout_ms // 2:
        raise ConfigError(f"{source}: controller.quorum.fetch.timeout.ms must exceed half the election timeout")


def _check_security(config: ServerConfig, listener: str, protocol: str, *, server: bool) -> None:
    """What a listener's protocol needs, said without reading a file: a keystore for a TLS
    server, mechanisms kraft serves and their JAAS entries for SASL. `server` False: this
    node's own connections to the controller listener (peers, registration, forwarding)."""
    source = config.source
    try:
        if protocol in ("SSL", "SASL_SSL"):
            tls = config.tls_settings(listener)
            tls.check()
            if server and not tls.has_keystore:
                raise TlsConfigError(f"{tls.where} is {protocol} but has no keystore: set ssl.keystore.type=PEM and "
                                     "ssl.keystore.location (the private key and certificate chain in one PEM file)")
    except TlsConfigError as e:
        raise ConfigError(str(e)) from None
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return
    where = f"{source}: listener {listener}"
    if server:
        mechanisms = config.security_of(listener).sasl_enabled_mechanisms
        wrong = [m for m in mechanisms if m not in sec.SASL_MECHANISMS]
        if wrong or not mechanisms:
            raise ConfigError(f"{where} is {protocol} with sasl.enabled.mechanisms {','.join(mechanisms) or '(none)'}; "
                              f"kraft serves {', '.join(sec.SASL_MECHANISMS)}: set sasl.enabled.mechanisms (or "
                              f"listener.name.{listener.lower()}.sasl.enabled.mechanisms)")
    else:
        mechanism = config.sasl_mechanism_controller_protocol
        if mechanism != sec.PLAIN:
            raise ConfigError(f"{source}: sasl.mechanism.controller.protocol is {mechanism}; kraft's nodes log in to "
                              "the controller listener with PLAIN (SCRAM credentials live in the metadata log, which "
                              "a controller must reach first): set it to PLAIN")
        mechanisms = (mechanism,)
    for mechanism in mechanisms:
        entry = config.jaas(listener, mechanism)
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}{sec.JAAS_SUFFIX}"
        if entry is None:
            if mechanism == sec.PLAIN:
                raise ConfigError(f"{where} offers PLAIN but {key} is missing: give {sec.LOGIN_MODULES[mechanism]} "
                                  'required username="..." password="..." user_<name>="<password>";')
            continue
        try:
            sec.check_jaas(key, mechanism, entry, client=not server)
        except ValueError as e:
            raise ConfigError(f"{source}: {e}") from None


def read_config(path: Path | str) -> ServerConfig:
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        line = path.read_bytes()[: e.start].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line} is not UTF-8 text (byte {e.start}); save the file as UTF-8") from None
    return load_config(parse_properties(text), str(path))
