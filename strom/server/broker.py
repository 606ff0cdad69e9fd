"""A strom broker process: startup, serving and shutdown, each in a fixed order.

Startup: check the log dirs (strom.startup.check_log_dirs: one that cannot be created, written or
is full stops here, before anything is made) → create and lock every log dir (its ``.lock``) → TLS
contexts and SASL settings of every listener (a bad certificate stops here, naming its key) →
bind the listeners (so the ports are known; a port in use stops here) → metadata store → log
manager (recovery) → the services: replica manager (with its fetchers), log-dir mover, group
coordinator, transaction coordinator (with its marker channel) → register the broker → controller
election → metadata → replicas → accept connections → print the bound port and write it to
``<first log dir>/strom.port``. A refusal is a StartupError naming the config key, printed as one
line by ``strom server-start``.

The broker composes; the services never see it. Each takes the collaborators it uses (objects,
callables such as ``internal_topics.ensure_offsets_topic``, a config Protocol that ``BrokerConfig`` satisfies),
and what is made later in this order (the controller, the producer id blocks, the transaction
coordinator) reaches an earlier service as a callable. ``lint-imports`` keeps it so: no module
below ``strom.server`` imports it. The broker's own parts that have a seam of their own are
modules beside it, built the same way: its registration and ZooKeeper session
(``registration``), the metadata reloads (``metadata_reload``), its part in the controller's work
(``controller_role``), the internal topics (``internal_topics``), its Schema Registry
(``broker_schema_registry``), its listeners' sockets, servers and TLS/SASL settings
(``listener_servers``), its effective config under the dynamic broker configs
(``dynamic_config_application``), opening its metadata store (``metadata_store_opening``),
creating topics and reading back what it wrote (``topic_creation``) and its background tasks
(``periodic``).

Shutdown (SIGTERM/SIGINT only set an event): stop accepting → let in-flight requests finish
under a timeout → stop background tasks → flush logs and checkpoints → write the clean-shutdown
marker → leave the metadata store.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from strom.cluster import model
from strom.cluster.controller import Controller
from strom.cluster.features import FeatureLevels
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.model import Broker as BrokerInfo
from strom.cluster.store import MetadataStore
from strom.group.coordinator import GroupCoordinator
from strom.metrics.stats import BrokerStats, RequestMetrics
from strom.replication.fetch_session import FetchSessionCache, TopicNames
from strom.replication.log_dir_mover import LogDirMover
from strom.replication.replica_manager import ReplicaManager
from strom.resources import keep_large_buffers_in_heap, raise_open_files_limit
from strom.security.authorizer import AclAuthorizer
from strom.security.credentials import CredentialCache
from strom.security.delegation_tokens import DelegationTokenManager
from strom.security.delegation_tokens import manager_for as delegation_token_manager
from strom.security.listeners import ListenerSecurity, inter_broker_security
from strom.server import dynamic_listeners, metadata_store_opening, parent_watch, reconfiguration
from strom.server.broker_schema_registry import BrokerSchemaRegistry
from strom.server.config import BrokerConfig
from strom.server.connection import Connection, close_departed_connections, close_idle_connections
from strom.server.connection_limits import ConnectionLimits
from strom.server.controller_role import ControllerRole
from strom.server.dispatcher import Dispatcher
from strom.server.dynamic_config_application import DynamicConfigApplication
from strom.server.handlers import fetch
from strom.server.iceberg_rest_catalog import BrokerRestCatalog, translator_catalog
from strom.server.internal_topics import InternalTopics
from strom.server.listener_servers import Endpoints, ListenerServers, Protocols
from strom.server.metadata_reload import MetadataReloader
from strom.server.periodic import BackgroundTasks
from strom.server.quotas import QuotaManager
from strom.server.refused_batches import RefusedBatches
from strom.server.registration import BrokerRegistration
from strom.server.secure_connection import SecureConnection
from strom.server.topic_creation import TopicCreation
from strom.startup import StartupError, check_log_dirs
from strom.storage import dir_lock
from strom.storage.log_config import LogConfig
from strom.storage.log_manager import LogManager, SchedulerIntervals
from strom.txn.coordinator import TransactionCoordinator
from strom.txn.markers import MarkerChannel
from strom.txn.producer_ids import ProducerIdManager

if TYPE_CHECKING:
    from strom.iceberg.translator import IcebergTranslator
    from strom.metrics.server import LoopLag, MetricsEndpoint
    from strom.security.client import ClientSecurity

log = logging.getLogger("strom.broker")

T = TypeVar("T")

PORT_FILE = "strom.port"
SHUTDOWN_GRACE_S = 5.0
FENCE_CHECK_S = 0.2
# how often a connection waiting on a parked request is checked for a client that has gone
# (close_departed_connections): a dead group member's session runs from when it is found
DEPARTED_CHECK_S = 0.5
SLOW_METADATA_PASS_S = 0.5


class Broker:
    def __init__(self, config: BrokerConfig):
        from strom.server.handlers import HANDLERS

        self.static_config = config  # server.properties (and --override) alone
        self.broker_id = config.broker_id
        self.metadata = MetadataCache()
        # KIP-227 fetch sessions, and topic id -> name for Fetch v13+ (strom.replication.fetch_session)
        self.fetch_sessions = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots, config.min_incremental_fetch_session_eviction_ms
        )
        self.topic_name_by_id = TopicNames(self.metadata)
        self.connections: set[Connection] = set()
        self._stop = asyncio.Event()  # set once shutdown has begun: background work ends
        self.background = BackgroundTasks(self._stop)  # run until shutdown, or every N seconds
        # the listeners' sockets, servers and TLS/SASL settings (strom.server.listener_servers); one
        # dispatcher per listener: a request's context names the listener it came in on
        self.listener_servers = ListenerServers(
            config.listeners,
            lambda name: Dispatcher(self, HANDLERS, name),
            self._new_connection,
            self.connections,
            self.background.run,
            self._stop,
            self._publish_endpoints,
        )
        self.dispatchers = self.listener_servers.dispatchers
        self.dispatcher = self.dispatchers[config.listeners[0].name]
        self.listener_security = self.listener_servers.security  # the same dict: replaced in place
        self.inter_broker_security: ClientSecurity | None = None
        self.credentials: CredentialCache = None  # type: ignore[assignment]  # made by start(), as the store below
        # None unless authorizer.class.name is set: handlers then test this one attribute and move on
        self.authorizer: AclAuthorizer | None = None
        self.delegation_tokens: DelegationTokenManager | None = None  # with delegation.token.secret.key
        self.quotas = QuotaManager(
            window_num=config.quota_window_num,
            window_size_s=config.quota_window_size_seconds,
            empty_fetch=lambda version: fetch.encode_response([], version),
        )
        self.features = FeatureLevels()  # /feature (KIP-584), read by ApiVersions, written by UpdateFeatures
        self.sasl_decoy_key = os.urandom(32)  # unknown SCRAM users get salts derived from it
        # Made by start(), which runs before anything that uses them (only shutdown() may see None,
        # after a failed start, and checks): typed as made, so their many readers need no checks.
        self.store: MetadataStore = None  # type: ignore[assignment]
        self.dir_locks: list[dir_lock.DirLock] = []  # one per log dir, held from start() to shutdown()'s end
        self.log_manager: LogManager = None  # type: ignore[assignment]
        self.replica_manager: ReplicaManager = None  # type: ignore[assignment]
        self.log_dir_mover: LogDirMover = None  # type: ignore[assignment]
        self.group_coordinator: GroupCoordinator = None  # type: ignore[assignment]
        self.controller: Controller = None  # type: ignore[assignment]
        self.transaction_coordinator: TransactionCoordinator | None = None
        self.host = ""
        self.port = 0
        self._shutdown_requested = asyncio.Event()  # SIGTERM/SIGINT
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # start()'s first line
        # /brokers/ids/<id> and the ZooKeeper session it lives in (strom.server.registration)
        self.registration = BrokerRegistration(
            self.broker_id,
            lambda: self.store,
            lambda: self.replica_manager,
            lambda: self.controller,
            lambda: self.config,
            lambda: self._loop,
            self._stop,
            lambda: self.reloader.schedule(),
        )
        # re-reads the znodes whose watches fired (strom.server.metadata_reload)
        self.reloader = MetadataReloader(
            lambda: self.store,
            self.metadata,
            self.refresh_metadata,
            lambda: self._loop,
            self._stop,
            after_reload=self.registration.unfence_if_confirmed,
        )
        # CreateTopics, auto.create.topics.enable and the internal topics; what a handler wrote, read back
        self.topics = TopicCreation(
            self.broker_id,
            self.metadata,
            lambda: self.controller,
            lambda: self.config,
            self.refresh_metadata,
            self.reloader,
        )
        self.create_topic = self.topics.create  # the names the handlers call them by
        self.auto_create_topic = self.topics.auto_create
        self.read_back = self.topics.read_back
        self.internal_topics = InternalTopics(
            lambda: self.config, self.metadata, self.topics.create, self.refresh_metadata
        )
        # standing for controller, and its passes while this broker holds the office
        self.controller_role = ControllerRole(
            lambda: self.controller,
            self.metadata,
            lambda: self.store,
            lambda: self.replica_manager,
            self._unclean_enabled,
            self.reloader.retry_everything,
            lambda: self._starting,
            self._stop,
        )
        self.started_at = time.monotonic()
        self._starting = True  # until start() has read the cluster metadata
        # metrics: counters are always kept (an addition each); request timing and the endpoint
        # only with metrics.listener, since timing reads the clock several times per request
        self.stats = BrokerStats()
        self.connection_limits = ConnectionLimits(
            config, config.inter_broker_listener_name, config.listener_limit, self.stats, self.quotas.ip_connection_rate
        )
        # the effective config under the dynamic broker configs (strom.server.dynamic_config_application)
        self.dynamic_configs = DynamicConfigApplication(
            self.broker_id,
            config,
            self.listener_security,
            lambda: self.inter_broker_security,
            lambda: self.log_manager,
            self._set_default_log_config,
            self.connection_limits,
            self.listener_servers.start_key_refreshers,
            self.listener_servers.change,
            self.background.run,
            lambda: self._starting,
        )
        self.request_metrics = (
            RequestMetrics(config.metrics_request_timing_samples_per_second) if config.metrics_listener else None
        )
        self.loop_lag: LoopLag | None = None  # strom.metrics.server imports prometheus_client: loaded when used
        self.metrics_endpoint: MetricsEndpoint | None = None
        # the Schema Registry's view of _schemas (made on first use) and its schema.registry.listeners
        self.schemas = BrokerSchemaRegistry(
            self.broker_id,
            self.metadata,
            lambda: self.replica_manager,
            self.internal_topics.ensure_schemas_topic,
            lambda: self.config,
            self.background.run,
            lambda: self._loop,
            self._stop,
        )
        self.iceberg: IcebergTranslator | None = None  # iceberg.enabled: the Iceberg topics' translator
        self.rest_catalog = BrokerRestCatalog(self.broker_id)  # iceberg.rest.catalog.listeners

    # -- startup -----------------------------------------------------------------------------------
    async def start(self) -> None:
        # before anything is bound or written: a second broker on a log dir goes away at once
        if not any(lock.held for lock in self.dir_locks):  # run_broker takes them before it logs
            self.dir_locks = dir_lock.acquire_all(self.config.log_dirs)
        self._loop = asyncio.get_running_loop()
        config = self.config
        self.listener_servers.secure(config)  # a certificate that does not load stops here
        self.inter_broker_security = inter_broker_security(config)
        self.listener_servers.bind(config)  # a port in use stops here
        listener = config.listeners[0]
        self.port = self.listener_servers.bound[listener.name][1]
        endpoints = self.listener_servers.endpoints(config)  # advertised.listeners, ports filled in once bound
        _, self.host, advertised_port = next((e for e in endpoints if e[0] == listener.name), endpoints[0])

        self.store, self.metadata.cluster_id = metadata_store_opening.open_store(config, self.dir_locks[0])
        self.log_manager = LogManager(
            list(config.log_dirs),
            config.log_config(),
            broker_id=self.broker_id,
            cluster_id=self.metadata.cluster_id,
            intervals=SchedulerIntervals(
                retention_check_ms=config.log_retention_check_interval_ms,
                checkpoint_ms=config.log_flush_offset_checkpoint_interval_ms,
                cleaner_backoff_ms=config.log_cleaner_backoff_ms,
                cleaner_enabled=config.log_cleaner_enable,
            ),
            topic_overrides=self._topic_overrides,
            cleaner_settings=reconfiguration.cleaner_settings(config),
        )
        if isinstance(self.store, LocalStore):  # its file lives in the first log dir
            self.log_manager.failure_listeners.append(self.store.on_log_dir_failure)
        self.log_manager.startup()
        if self.log_manager.offline_dirs >= set(config.log_dirs):  # as Kafka: nothing left to serve from
            raise StartupError(
                "log.dirs", f"every log dir failed at startup ({', '.join(config.log_dirs)}): see the log"
            )
        self.replica_manager = ReplicaManager(
            self.broker_id,
            config,
            self.log_manager,
            self.metadata,
            self.store,
            self.stats,
            controller_epoch=lambda: self.controller.epoch,  # the controller is made after the replicas
            request_metadata_reload=self.request_metadata_reload,
            publish_offline_replicas=self.registration.publish_offline_replicas,
            inter_broker_security=self.inter_broker_security,
            schema_check=self.schemas.check_schema_ids,
        )
        self.refused_batches = RefusedBatches()
        self.log_dir_mover = LogDirMover(self.log_manager, self.replica_manager, self.metadata, self.broker_id)
        self.group_coordinator = GroupCoordinator(
            config, self.metadata, self.replica_manager, verify_txn_partitions=self._verify_txn_partitions
        )
        self.replica_manager.leadership_listeners.append(self.group_coordinator.on_leadership_change)
        markers = MarkerChannel(
            self.broker_id,
            self.metadata,
            self.replica_manager,
            self.group_coordinator.offsets.complete_txn,
            listener=config.inter_broker_listener_name,
            stopping=lambda: self.stopping,
            security=self.inter_broker_security,
        )
        self.transaction_coordinator = TransactionCoordinator(
            self.broker_id,
            config,
            self.metadata,
            self.replica_manager,
            markers,
            next_producer_id=lambda: self.producer_ids.next_id(),  # its id blocks are read after the election
            ensure_offsets_topic=self.internal_topics.ensure_offsets_topic,
            offsets_partition_for=lambda group_id: self.group_coordinator.store.partition_for(group_id),
            stopping=lambda: self.stopping,
        )
        self.replica_manager.leadership_listeners.append(self.transaction_coordinator.on_leadership_change)
        step = self._startup_step  # each ZooKeeper step retried while ZooKeeper does not answer

        def ensure_paths() -> None:
            for path in (model.BROKERS_IDS, model.BROKERS_TOPICS, model.CONFIG_TOPICS):
                self.store.ensure_path(path)

        step("creating the base paths", ensure_paths)
        self.credentials = CredentialCache(self.store, self._loop)
        step("reading SCRAM credentials", self.credentials.load)
        step("reading client quotas", lambda: self.quotas.start(self.store, self._loop))
        step("reading the feature levels", lambda: self.features.start(self.store, self._loop))
        # /config/groups (KIP-848 group configs)
        step("reading group configs", lambda: self.group_coordinator.configs.start(self.store, self._loop))
        if config.authorizer_class_name:
            self.authorizer = AclAuthorizer(
                self.store, config.super_users, config.allow_everyone_if_no_acl_found, self._loop
            )
            step("reading ACLs", self.authorizer.load)
        self.delegation_tokens = step(
            "reading delegation tokens", lambda: delegation_token_manager(config, self.store, self._loop)
        )
        if config.schema_registry_listeners:  # bound before registering: the registration carries its URL
            self.schemas.bind(config.schema_registry_listeners, self.host)
        if config.iceberg_rest_catalog_listeners:
            self.rest_catalog.bind(config.iceberg_rest_catalog_listeners, self.host)
        self.registration.info = BrokerInfo(
            self.broker_id,
            self.host,
            advertised_port,
            config.broker_rack,
            endpoints=tuple(endpoints),
            protocols=tuple((name, config.protocol_of(name)) for name, _, _ in endpoints),
            schema_registry=self.schemas.url,
        )
        # from here on a session that expires takes the registration with it: be told, to make it again
        if hasattr(self.store, "session_listeners"):
            self.store.session_listeners.append(self.registration.on_session_event)
        # a ZooKeeper registration left by a crashed predecessor expires within the session timeout
        wait_s = config.zookeeper_session_timeout_ms / 1000 + 2 if config.zookeeper_connect else 0
        step(f"registering broker {self.broker_id}", lambda: self.registration.register(wait_s))
        self.controller = Controller(self.store, self.broker_id, config.log_config())
        step("electing the controller", self.controller.elect)
        self.producer_ids = ProducerIdManager(self.store, self.broker_id)
        step("reading the cluster metadata", self.refresh_metadata)
        self._starting = False

        await self.listener_servers.serve()
        if dynamic_listeners.differ(self.static_config, self.config):  # dynamic listener configs read at startup
            await self.listener_servers.change(self.static_config, self.config)
        self.background.run(self.log_manager.run_scheduler(self._stop))
        if config.iceberg_enabled:
            self._start_iceberg(config)
        self.background.run(self.log_dir_mover.run(self._stop))
        self.background.every(
            config.offsets_retention_check_interval_ms / 1000,
            self.group_coordinator.offsets.expire_and_log,
            "offset expiry",
        )
        self.background.run(self.transaction_coordinator.run_timers())
        self.background.every(
            DEPARTED_CHECK_S, lambda: close_departed_connections(self.connections), "departed connection check"
        )
        if config.connections_max_idle_ms > 0:
            max_idle_ms = config.connections_max_idle_ms
            self.background.every(
                min(30.0, max(0.1, max_idle_ms / 10_000)),  # closed within ~10% of the limit
                lambda: close_idle_connections(self.connections, max_idle_ms),
                "idle connection check",
            )
        self.background.every(
            max(0.05, config.replica_lag_time_max_ms / 2000), self.replica_manager.shrink_isrs, "ISR check"
        )
        if config.zookeeper_connect:
            # a pause of half the session may have outlasted it (the last heartbeat came before it)
            self.replica_manager.stall_fence_s = config.zookeeper_session_timeout_ms / 2000
            self.replica_manager.session_checked_at = time.monotonic()
            self.replica_manager.session_checked_cpu = time.process_time()
            self.background.every(FENCE_CHECK_S, self.registration.check_session, "ZooKeeper session check")
        if config.auto_leader_rebalance_enable:
            self.background.every(
                config.leader_imbalance_check_interval_seconds, self._rebalance_leaders, "preferred leader rebalance"
            )
        if self.delegation_tokens is not None:
            self.background.every(
                config.delegation_token_expiry_check_interval_ms / 1000,
                self.delegation_tokens.remove_expired,
                "delegation token expiry",
            )
        if config.metrics_listener:
            self._start_metrics(config.metrics_listener)
        await self.schemas.serve(self.credentials.lookup)  # with schema.registry.listeners
        self.rest_catalog.serve(config, self.credentials.lookup)  # with iceberg.rest.catalog.listeners
        self._announce(listener.host, self.port)

    def _start_iceberg(self, config: BrokerConfig) -> None:
        from strom.iceberg.translator import IcebergTranslator

        replicas = self.replica_manager

        def leaders():
            if replicas.fenced:  # a broker that cannot confirm its session leads nothing
                return []
            return [(p.topic, p.index, p.log.config, p.log) for p in list(replicas.partitions.values()) if p.is_leader]

        catalog = translator_catalog(config)

        def schemas(topic: str, subject: str | None = None):
            from strom.server.iceberg_schemas import schema_set

            return schema_set(self.schemas.service(), replicas, self.metadata, topic, subject)

        self.iceberg = IcebergTranslator(
            catalog,
            leaders,
            config.iceberg_target_lag_ms,
            schemas=schemas,
            topic_id=lambda topic: info.topic_id.hex if (info := self.metadata.topics.get(topic)) else None,
            confirmed_topic_id=self._stored_topic_id,
        )
        self.background.run(self.iceberg.run(self._stop))

    def _stored_topic_id(self, topic: str) -> str | None:
        """The topic's id as the metadata store has it now (the cache may be behind a deletion)."""
        if not self.store:
            info = self.metadata.topics.get(topic)
            return info.topic_id.hex if info else None
        found = self.store.get_or_none(model.topic_path(topic))
        return model.TopicAssignment.from_json(topic, found[0]).topic_id.hex if found else None

    def _start_metrics(self, listener: str) -> None:
        from strom.metrics.collector import Sources
        from strom.metrics.server import LoopLag, MetricsEndpoint, parse_listener

        self.loop_lag = LoopLag()
        self.background.run(self.loop_lag.run(self._stop))
        if self.request_metrics is not None:  # how many requests to time follows the request rate
            self.background.run(self.request_metrics.adapt(self._stop))
        sources = Sources(
            stats=self.stats,
            metadata=self.metadata,
            replica_manager=self.replica_manager,
            controller=self.controller,
            group_coordinator=self.group_coordinator,
            connections=self.connections,
            request_metrics=self.request_metrics,
            loop_lag=self.loop_lag,
            iceberg_lag=self.iceberg.lag if self.iceberg is not None else None,
            iceberg_counters=self.iceberg.counters if self.iceberg is not None else None,
        )
        log_dirs = self.config.log_dirs
        assert log_dirs, "resolved from log.dir when not set"
        self.metrics_endpoint = MetricsEndpoint(
            sources, *parse_listener("metrics.listener", listener), broker_id=self.broker_id, url_dir=log_dirs[0]
        )
        self.metrics_endpoint.start(asyncio.get_running_loop())

    def _new_connection(self, security: ListenerSecurity, dispatcher: Dispatcher) -> Connection:
        """A connection accepted on a listener (strom.server.listener_servers)."""
        if security.protocol != "PLAINTEXT":
            return SecureConnection(self, security, dispatcher)
        connection = Connection(self)
        connection.dispatcher = dispatcher
        return connection

    def _startup_step(self, what: str, step: Callable[[], T]) -> T:
        return metadata_store_opening.startup_step(self.config, what, step)

    def _topic_overrides(self, topic: str) -> dict[str, str]:
        info = self.metadata.topics.get(topic)
        if info is not None:
            return info.configs
        if not self.store:
            return {}
        path = model.topic_config_path(topic)
        if self._starting:  # log recovery reads it before anything is served
            found = self._startup_step(f"reading {path}", lambda: self.store.get_or_none(path))
        else:
            found = self.store.get_or_none(path)
        return model.parse_topic_config(found[0]) if found else {}

    def _announce(self, host: str, port: int) -> None:
        address = f"{host}:{port}"
        bound = self.listener_servers.bound
        if len(bound) > 1:
            address = ", ".join(f"{name}://{h}:{p}" for name, (h, p) in bound.items())
        with open(os.path.join(self.config.log_dirs[0], PORT_FILE + ".tmp"), "w") as handle:
            handle.write(f"{port}\n")
        os.replace(
            os.path.join(self.config.log_dirs[0], PORT_FILE + ".tmp"), os.path.join(self.config.log_dirs[0], PORT_FILE)
        )
        took = time.monotonic() - self.started_at
        log.info("broker %d started in %.2fs, listening on %s", self.broker_id, took, address)
        print(
            f"strom broker {self.broker_id} listening on {address} (data in {', '.join(self.config.log_dirs)})",
            flush=True,
        )
        if self.metrics_endpoint is not None:
            print(f"strom broker {self.broker_id} metrics on {self.metrics_endpoint.url}", flush=True)
        if self.schemas.http is not None:
            print(f"strom broker {self.broker_id} Schema Registry on {self.schemas.url}", flush=True)

    def request_metadata_reload(self, path: str | None = None) -> None:
        """Re-read the znode ``path`` soon (everything with None): the cache holds a stale copy."""
        self.reloader.schedule(path)

    def refresh_metadata(self, changed: set[str] | None = None, reads: MetadataStore | None = None) -> None:
        """Re-read cluster metadata and bring local replicas in line (after any metadata change).

        ``changed`` names the znodes whose watches fired: only they are re-read, and the
        controller's reconcile pass and the replica manager's pass look only at the partitions
        they changed (a MetadataDelta). With None everything is re-read and looked at. What the
        controller writes goes into the cache at once, with its versions; the read that its
        watches cause later finds those versions and changes nothing. ``reads`` answers the
        reads instead of the store when they were made ahead on a thread.
        """
        watch = self.reloader.on_store_change
        started = time.monotonic()
        self.reloader.passes += 1
        known = {name: info.topic_id for name, info in self.metadata.topics.items()}
        source = self.store if reads is None else reads
        if changed is None:
            delta = self.metadata.load(source, watch=watch)
        else:
            delta = self.metadata.apply_changes(source, changed, watch)
        self._forget_offsets_of_deleted_topics(known)
        self.dynamic_configs.apply(self.metadata.broker_configs)
        read = time.monotonic()
        written = self.controller_role.after_metadata_pass(delta)
        decided = time.monotonic()
        # a deleted topic's stray logs are found only by a pass over everything
        self.replica_manager.apply_metadata(None if delta.full or delta.topics_removed else delta.partitions)
        self.stats.forget_topics(self.metadata.topics.keys())
        took = time.monotonic() - started
        if took > SLOW_METADATA_PASS_S:  # the event loop served nobody meanwhile: worth a line
            log.info(
                "metadata pass took %.2fs: read %s in %.2fs, %d states written by the controller in %.2fs, "
                "%s partitions applied in %.2fs",
                took,
                "everything" if delta.full else f"{len(changed or ())} changed znodes",
                read - started,
                len(written),
                decided - read,
                "all" if delta.full or delta.topics_removed else len(delta.partitions),
                time.monotonic() - decided,
            )

    @property
    def config(self) -> BrokerConfig:
        """The effective config: server.properties with the dynamic configs laid over it."""
        return self.dynamic_configs.config

    def _set_default_log_config(self, defaults: LogConfig) -> None:
        self.controller.default_log_config = defaults

    def _publish_endpoints(self, endpoints: Endpoints, protocols: Protocols) -> None:
        """The registration with the endpoints of listeners changed at run time."""
        if self.registration.publish_endpoints(endpoints, protocols):
            self.read_back({model.broker_path(self.broker_id)})

    def _forget_offsets_of_deleted_topics(self, known: Mapping[str, object]) -> None:
        """Topics gone since the last load (or re-created under a new id) lose their groups' offsets."""
        topics = self.metadata.topics
        deleted = {
            name for name, topic_id in known.items() if (info := topics.get(name)) is None or info.topic_id != topic_id
        }
        if not deleted:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a broker driven without its event loop (the fuzz harness) writes nothing
            return
        self.background.run(self.group_coordinator.offsets.remove_offsets_of_deleted_topics(deleted), loop)

    def _rebalance_leaders(self) -> None:
        """auto.leader.rebalance.enable: run every leader.imbalance.check.interval.seconds (acts on the controller)."""
        moved = self.controller.preferred_leader_moves(
            self.metadata, self.config.leader_imbalance_per_broker_percentage
        )
        if moved:
            log.info("moved %d leaderships back to their preferred replicas", moved)

    def _unclean_enabled(self, topic: str) -> bool:
        return self.log_manager.config_for(topic).unclean_leader_election_enable

    async def _verify_txn_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """The group coordinator's check of a TxnOffsetCommit, by the transaction coordinator made after it."""
        assert self.transaction_coordinator is not None  # the broker builds both coordinators before serving
        return await self.transaction_coordinator.verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- serving -----------------------------------------------------------------------------------
    def request_stop(self) -> None:
        self._shutdown_requested.set()

    async def serve_until_stopped(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.request_stop)
            except (NotImplementedError, RuntimeError):
                pass
        await self._shutdown_requested.wait()
        await self.shutdown()

    async def _controlled_shutdown(self) -> None:
        """Hand leaderships to other in-sync replicas before going away, as Kafka's controlled shutdown.

        Deregistering makes the controller elect new leaders at once; serving continues until this
        broker leads nothing that another live ISR member could take (bounded wait).
        """
        if not self.config.controlled_shutdown_enable or len(self.metadata.brokers) <= 1:
            return
        try:
            self.store.delete(model.broker_path(self.broker_id))
        except Exception:
            return
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        while time.monotonic() < deadline:
            movable = [
                p
                for p in self.replica_manager.partitions.values()
                if p.is_leader and any(b != self.broker_id and b in self.metadata.brokers for b in p.isr)
            ]
            if not movable:
                log.info("controlled shutdown: no leaderships left to move")
                return
            await asyncio.sleep(0.05)
        log.warning("controlled shutdown: still leading %d partitions after %.0fs", len(movable), SHUTDOWN_GRACE_S)

    async def shutdown(self, crash: bool = False) -> None:
        """Stop serving; with ``crash`` stop as a kill -9 leaves things instead.

        A crash makes no controlled shutdown, waits for no request, flushes and checkpoints
        nothing and writes no clean-shutdown marker, so the next start recovers. strom.testing's
        in-process broker uses it for ``kill``, since a thread cannot be killed.
        """
        if not self.dir_locks:  # start() was refused a log dir's lock (or never ran): nothing to stop
            return
        log.info("broker %d %s", self.broker_id, "aborting" if crash else "shutting down")
        if not crash and self.iceberg is not None and not self._stop.is_set():
            # best effort, while this broker still leads: the next leader resumes from the table anyway
            await self._bounded(self.iceberg.run_round(), "the last Iceberg round")
        if not crash and self.store is not None and self.replica_manager is not None and not self._stop.is_set():
            await self._controlled_shutdown()
        self._stop.set()
        self.reloader.close()
        self.registration.close()
        self.controller_role.close()
        self.listener_servers.close()
        self.schemas.close()
        self.rest_catalog.close()
        if self.credentials is not None:
            self.credentials.stop()
        self.quotas.stop()
        self.features.stop()
        if self.group_coordinator is not None:  # None when start() failed before making it
            self.group_coordinator.configs.stop()
        if self.authorizer is not None:
            self.authorizer.stop()
        if self.delegation_tokens is not None:
            self.delegation_tokens.stop()
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        while not crash and any(not c.idle for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.abort() if crash else connection.transport.close()
        # Every step is bounded: a shutdown that hangs is worse than one that skips a courtesy.
        await self._bounded(self.background.cancel(), "background tasks")
        if self.transaction_coordinator is not None:
            await self._bounded(self.transaction_coordinator.shutdown(), "transaction markers")
        if self.replica_manager is not None:
            await self._bounded(self.replica_manager.fetchers.shutdown(), "replica fetchers")
            self.replica_manager.close()
        if self.log_manager is not None:
            if crash:
                for partition_log in [*self.log_manager.logs.values(), *self.log_manager.moves.future_logs.values()]:
                    partition_log.close_crashlike()
            else:
                self.log_manager.shutdown()
        if self.store is not None:
            await self._bounded(
                asyncio.get_running_loop().run_in_executor(None, self.store.close), "closing the metadata store"
            )
        if self.metrics_endpoint is not None:
            await self._bounded(
                asyncio.get_running_loop().run_in_executor(None, self.metrics_endpoint.stop), "the metrics endpoint"
            )
        for lock in self.dir_locks:  # last: the next broker on these dirs may start now
            lock.release()
        log.info("broker %d stopped", self.broker_id)

    @staticmethod
    async def _bounded(step, what: str) -> None:
        try:
            await asyncio.wait_for(step, SHUTDOWN_GRACE_S)
        except TimeoutError:
            log.warning("shutdown: %s did not finish within %.0fs; going on", what, SHUTDOWN_GRACE_S)


def run_broker(config: BrokerConfig, parent_pid: int | None = None) -> int:
    """Run a broker in this process until SIGTERM/SIGINT, or until its parent ``parent_pid`` is
    gone (strom.server.parent_watch); returns the exit status."""
    if parent_pid is not None and parent_watch.parent_gone(parent_pid):
        log.warning("parent process %d is gone (--parent-pid): not starting", parent_pid)
        return 1
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    check_log_dirs(config.log_dirs)  # a dir that cannot be made, written or filled: refused before any is made
    # refused before anything is logged: the refusal is the only line a second broker prints
    locks = dir_lock.acquire_all(config.log_dirs)
    raise_open_files_limit()
    keep_large_buffers_in_heap()

    async def main() -> None:
        broker = Broker(config)
        broker.dir_locks = locks
        watch = None
        if parent_pid is not None:  # from before start(): a parent dying meanwhile stops it once started
            watch = asyncio.create_task(parent_watch.watch_parent(parent_pid, broker.request_stop))
        try:
            await broker.start()
        except BaseException:
            await broker.shutdown()
            raise
        # Everything made so far (modules, schema classes, the logs and metadata of startup) lives
        # as long as the broker: out of the collector's reach, a full collection no longer scans
        # it, which took 25-70 ms with the event loop stopped, stalling every acks=all produce.
        gc.freeze()
        await broker.serve_until_stopped()
        if watch is not None:
            watch.cancel()

    asyncio.run(main())
    return 0
