"""Kafka 3.9's broker configs and how each may be changed at run time (KIP-226's "Update Mode").

Taken from the "Update Mode" of each key in Kafka 3.9's broker config reference
(kafka_config.html, generated from ``DynamicBrokerConfig``): ``read-only`` keys need a restart,
``per-broker`` keys may be set on one broker (``/config/brokers/<id>``), ``cluster-wide`` keys on one
broker or as the cluster default (``/config/brokers/<default>``). The three replication quota keys
(Kafka's ``QuotaConfig.brokerQuotaConfigs``) are cluster-wide too, though the reference does not
list them. Kafka's own rules on top of the modes, kept here so the handlers need no table of their own:

- a name Kafka does not know is a custom config: stored as given (plugins read them);
- ``listener.name.<listener>.<key>`` is one listener's value of ``<key>``: typed as ``<key>``, and
  per-broker unless ``<key>`` is one of ``CLUSTER_LEVEL_LISTENER_KEYS``;
- the keystore and truststore keys (``SslConfigs.RECONFIGURABLE_CONFIGS``) change only with the
  listener prefix, since each listener has its own TLS context;
- secrets (Kafka's PASSWORD type, and any name ending in one) are stored encoded with
  ``password.encoder.secret``.
"""

from __future__ import annotations

import re

READ_ONLY_MODE, PER_BROKER_MODE, CLUSTER_WIDE_MODE = "read-only", "per-broker", "cluster-wide"

READ_ONLY: frozenset[str] = frozenset(
    (
        "alter.config.policy.class.name",
        "alter.log.dirs.replication.quota.window.num",
        "alter.log.dirs.replication.quota.window.size.seconds",
        "authorizer.class.name",
        "auto.create.topics.enable",
        "auto.include.jmx.reporter",
        "auto.leader.rebalance.enable",
        "broker.heartbeat.interval.ms",
        "broker.id",
        "broker.id.generation.enable",
        "broker.rack",
        "broker.session.timeout.ms",
        "client.quota.callback.class",
        "connection.failed.authentication.delay.ms",
        "connections.max.idle.ms",
        "connections.max.reauth.ms",
        "control.plane.listener.name",
        "controlled.shutdown.enable",
        "controlled.shutdown.max.retries",
        "controlled.shutdown.retry.backoff.ms",
        "controller.listener.names",
        "controller.quorum.append.linger.ms",
        "controller.quorum.bootstrap.servers",
        "controller.quorum.election.backoff.max.ms",
        "controller.quorum.election.timeout.ms",
        "controller.quorum.fetch.timeout.ms",
        "controller.quorum.request.timeout.ms",
        "controller.quorum.retry.backoff.ms",
        "controller.quorum.voters",
        "controller.quota.window.num",
        "controller.quota.window.size.seconds",
        "controller.socket.timeout.ms",
        "create.topic.policy.class.name",
        "default.replication.factor",
        "delegation.token.expiry.check.interval.ms",
        "delegation.token.expiry.time.ms",
        "delegation.token.master.key",
        "delegation.token.max.lifetime.ms",
        "delegation.token.secret.key",
        "delete.records.purgatory.purge.interval.requests",
        "delete.topic.enable",
        "early.start.listeners",
        "eligible.leader.replicas.enable",
        "fetch.max.bytes",
        "fetch.purgatory.purge.interval.requests",
        "group.consumer.assignors",
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
        "group.consumer.max.session.timeout.ms",
        "group.consumer.max.size",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.session.timeout.ms",
        "group.coordinator.append.linger.ms",
        "group.coordinator.rebalance.protocols",
        "group.coordinator.threads",
        "group.initial.rebalance.delay.ms",
        "group.max.session.timeout.ms",
        "group.max.size",
        "group.min.session.timeout.ms",
        "group.share.delivery.count.limit",
        "group.share.heartbeat.interval.ms",
        "group.share.max.groups",
        "group.share.max.heartbeat.interval.ms",
        "group.share.max.record.lock.duration.ms",
        "group.share.max.session.timeout.ms",
        "group.share.max.size",
        "group.share.min.heartbeat.interval.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.min.session.timeout.ms",
        "group.share.partition.max.record.locks",
        "group.share.record.lock.duration.ms",
        "group.share.session.timeout.ms",
        "initial.broker.registration.timeout.ms",
        "inter.broker.listener.name",
        "inter.broker.protocol.version",
        "kafka.metrics.polling.interval.secs",
        "kafka.metrics.reporters",
        "leader.imbalance.check.interval.seconds",
        "leader.imbalance.per.broker.percentage",
        "log.cleaner.enable",
        "log.dir",
        "log.dir.failure.timeout.ms",
        "log.dirs",
        "log.flush.offset.checkpoint.interval.ms",
        "log.flush.scheduler.interval.ms",
        "log.flush.start.offset.checkpoint.interval.ms",
        "log.message.format.version",
        "log.retention.check.interval.ms",
        "log.retention.hours",
        "log.retention.minutes",
        "log.roll.hours",
        "log.roll.jitter.hours",
        "max.incremental.fetch.session.cache.slots",
        "max.request.partition.size.limit",
        "metadata.log.dir",
        "metadata.log.max.record.bytes.between.snapshots",
        "metadata.log.max.snapshot.interval.ms",
        "metadata.log.segment.bytes",
        "metadata.log.segment.ms",
        "metadata.max.idle.interval.ms",
        "metadata.max.retention.bytes",
        "metadata.max.retention.ms",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "node.id",
        "num.partitions",
        "num.replica.alter.log.dirs.threads",
        "offset.metadata.max.bytes",
        "offsets.commit.required.acks",
        "offsets.commit.timeout.ms",
        "offsets.load.buffer.size",
        "offsets.retention.check.interval.ms",
        "offsets.retention.minutes",
        "offsets.topic.compression.codec",
        "offsets.topic.num.partitions",
        "offsets.topic.replication.factor",
        "offsets.topic.segment.bytes",
        "password.encoder.cipher.algorithm",
        "password.encoder.iterations",
        "password.encoder.key.length",
        "password.encoder.keyfactory.algorithm",
        "password.encoder.old.secret",
        "password.encoder.secret",
        "process.roles",
        "producer.purgatory.purge.interval.requests",
        "queued.max.request.bytes",
        "queued.max.requests",
        "quota.window.num",
        "quota.window.size.seconds",
        "remote.log.manager.copier.thread.pool.size",
        "remote.log.manager.copy.quota.window.num",
        "remote.log.manager.copy.quota.window.size.seconds",
        "remote.log.manager.expiration.thread.pool.size",
        "remote.log.manager.fetch.quota.window.num",
        "remote.log.manager.fetch.quota.window.size.seconds",
        "remote.log.manager.task.interval.ms",
        "remote.log.manager.thread.pool.size",
        "remote.log.metadata.custom.metadata.max.bytes",
        "remote.log.metadata.manager.class.name",
        "remote.log.metadata.manager.class.path",
        "remote.log.metadata.manager.impl.prefix",
        "remote.log.metadata.manager.listener.name",
        "remote.log.reader.max.pending.tasks",
        "remote.log.reader.threads",
        "remote.log.storage.manager.class.name",
        "remote.log.storage.manager.class.path",
        "remote.log.storage.manager.impl.prefix",
        "remote.log.storage.system.enable",
        "replica.fetch.backoff.ms",
        "replica.fetch.max.bytes",
        "replica.fetch.min.bytes",
        "replica.fetch.response.max.bytes",
        "replica.fetch.wait.max.ms",
        "replica.high.watermark.checkpoint.interval.ms",
        "replica.lag.time.max.ms",
        "replica.selector.class",
        "replica.socket.receive.buffer.bytes",
        "replica.socket.timeout.ms",
        "replication.quota.window.num",
        "replication.quota.window.size.seconds",
        "request.timeout.ms",
        "reserved.broker.max.id",
        "sasl.client.callback.handler.class",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.retry.backoff.max.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.mechanism.controller.protocol",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.server.callback.handler.class",
        "sasl.server.max.receive.size",
        "security.inter.broker.protocol",
        "security.providers",
        "socket.connection.setup.timeout.max.ms",
        "socket.connection.setup.timeout.ms",
        "socket.listen.backlog.size",
        "socket.receive.buffer.bytes",
        "socket.request.max.bytes",
        "socket.send.buffer.bytes",
        "ssl.allow.dn.changes",
        "ssl.allow.san.changes",
        "ssl.principal.mapping.rules",
        "telemetry.max.bytes",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "transaction.max.timeout.ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "transaction.state.log.load.buffer.size",
        "transaction.state.log.min.isr",
        "transaction.state.log.num.partitions",
        "transaction.state.log.replication.factor",
        "transaction.state.log.segment.bytes",
        "transactional.id.expiration.ms",
        "zookeeper.clientCnxnSocket",
        "zookeeper.connect",
        "zookeeper.connection.timeout.ms",
        "zookeeper.max.in.flight.requests",
        "zookeeper.metadata.migration.enable",
        "zookeeper.session.timeout.ms",
        "zookeeper.set.acl",
        "zookeeper.ssl.cipher.suites",
        "zookeeper.ssl.client.enable",
        "zookeeper.ssl.crl.enable",
        "zookeeper.ssl.enabled.protocols",
        "zookeeper.ssl.endpoint.identification.algorithm",
        "zookeeper.ssl.keystore.location",
        "zookeeper.ssl.keystore.password",
        "zookeeper.ssl.keystore.type",
        "zookeeper.ssl.ocsp.enable",
        "zookeeper.ssl.protocol",
        "zookeeper.ssl.truststore.location",
        "zookeeper.ssl.truststore.password",
        "zookeeper.ssl.truststore.type",
    )
)

PER_BROKER: frozenset[str] = frozenset(
    (
        "advertised.listeners",
        "listener.security.protocol.map",
        "listeners",
        "principal.builder.class",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.kerberos.service.name",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.mechanism.inter.broker.protocol",
        "ssl.cipher.suites",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.endpoint.identification.algorithm",
        "ssl.engine.factory.class",
        "ssl.key.password",
        "ssl.keymanager.algorithm",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.protocol",
        "ssl.provider",
        "ssl.secure.random.implementation",
        "ssl.trustmanager.algorithm",
        "ssl.truststore.certificates",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
    )
)

CLUSTER_WIDE: frozenset[str] = frozenset(
    (
        "background.threads",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.threads",
        "log.cleanup.policy",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.index.interval.bytes",
        "log.index.size.max.bytes",
        "log.local.retention.bytes",
        "log.local.retention.ms",
        "log.message.downconversion.enable",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.difference.max.ms",
        "log.message.timestamp.type",
        "log.preallocate",
        "log.retention.bytes",
        "log.retention.ms",
        "log.roll.jitter.ms",
        "log.roll.ms",
        "log.segment.bytes",
        "log.segment.delete.delay.ms",
        "max.connection.creation.rate",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "message.max.bytes",
        "metric.reporters",
        "min.insync.replicas",
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "num.replica.fetchers",
        "producer.id.expiration.ms",
        "remote.fetch.max.wait.ms",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
        "transaction.partition.verification.enable",
        "unclean.leader.election.enable",
    )
)

# Kafka's QuotaConfig.brokerQuotaConfigs: the replication throttles (strom.replication.throttle)
QUOTA_KEYS: frozenset[str] = frozenset(
    (
        "follower.replication.throttled.rate",
        "leader.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    )
)

# Each dynamic key's Kafka type (ConfigDef.Type, lower case): the values of keys strom has no field
# for are checked against it, as Kafka's ConfigDef parses them.
DYNAMIC_TYPES: dict[str, str] = {
    # boolean
    "log.message.downconversion.enable": "boolean",
    "log.preallocate": "boolean",
    "transaction.partition.verification.enable": "boolean",
    "unclean.leader.election.enable": "boolean",
    # class
    "principal.builder.class": "class",
    "ssl.engine.factory.class": "class",
    # double
    "log.cleaner.io.buffer.load.factor": "double",
    "log.cleaner.io.max.bytes.per.second": "double",
    "log.cleaner.min.cleanable.ratio": "double",
    "sasl.kerberos.ticket.renew.jitter": "double",
    "sasl.kerberos.ticket.renew.window.factor": "double",
    "sasl.login.refresh.window.factor": "double",
    "sasl.login.refresh.window.jitter": "double",
    # int
    "background.threads": "int",
    "compression.gzip.level": "int",
    "compression.lz4.level": "int",
    "compression.zstd.level": "int",
    "log.cleaner.io.buffer.size": "int",
    "log.cleaner.threads": "int",
    "log.index.interval.bytes": "int",
    "log.index.size.max.bytes": "int",
    "log.segment.bytes": "int",
    "max.connection.creation.rate": "int",
    "max.connections": "int",
    "max.connections.per.ip": "int",
    "message.max.bytes": "int",
    "min.insync.replicas": "int",
    "num.io.threads": "int",
    "num.network.threads": "int",
    "num.recovery.threads.per.data.dir": "int",
    "num.replica.fetchers": "int",
    "producer.id.expiration.ms": "int",
    "remote.fetch.max.wait.ms": "int",
    # list
    "log.cleanup.policy": "list",
    "metric.reporters": "list",
    "sasl.enabled.mechanisms": "list",
    "sasl.kerberos.principal.to.local.rules": "list",
    "ssl.cipher.suites": "list",
    "ssl.enabled.protocols": "list",
    # long
    "log.cleaner.backoff.ms": "long",
    "log.cleaner.dedupe.buffer.size": "long",
    "log.cleaner.delete.retention.ms": "long",
    "log.cleaner.max.compaction.lag.ms": "long",
    "log.cleaner.min.compaction.lag.ms": "long",
    "log.flush.interval.messages": "long",
    "log.flush.interval.ms": "long",
    "log.local.retention.bytes": "long",
    "log.local.retention.ms": "long",
    "log.message.timestamp.after.max.ms": "long",
    "log.message.timestamp.before.max.ms": "long",
    "log.message.timestamp.difference.max.ms": "long",
    "log.retention.bytes": "long",
    "log.retention.ms": "long",
    "log.roll.jitter.ms": "long",
    "log.roll.ms": "long",
    "log.segment.delete.delay.ms": "long",
    "remote.log.index.file.cache.total.size.bytes": "long",
    "remote.log.manager.copy.max.bytes.per.second": "long",
    "remote.log.manager.fetch.max.bytes.per.second": "long",
    "sasl.kerberos.min.time.before.relogin": "long",
    # password
    "sasl.jaas.config": "password",
    "ssl.key.password": "password",
    "ssl.keystore.certificate.chain": "password",
    "ssl.keystore.key": "password",
    "ssl.keystore.password": "password",
    "ssl.truststore.certificates": "password",
    "ssl.truststore.password": "password",
    # short
    "sasl.login.refresh.buffer.seconds": "short",
    "sasl.login.refresh.min.period.seconds": "short",
    # string
    "advertised.listeners": "string",
    "compression.type": "string",
    "listener.security.protocol.map": "string",
    "listeners": "string",
    "log.message.timestamp.type": "string",
    "max.connections.per.ip.overrides": "string",
    "sasl.kerberos.kinit.cmd": "string",
    "sasl.kerberos.service.name": "string",
    "sasl.mechanism.inter.broker.protocol": "string",
    "ssl.client.auth": "string",
    "ssl.endpoint.identification.algorithm": "string",
    "ssl.keymanager.algorithm": "string",
    "ssl.keystore.location": "string",
    "ssl.keystore.type": "string",
    "ssl.protocol": "string",
    "ssl.provider": "string",
    "ssl.secure.random.implementation": "string",
    "ssl.trustmanager.algorithm": "string",
    "ssl.truststore.location": "string",
    "ssl.truststore.type": "string",
    # quotas
    "follower.replication.throttled.rate": "long",
    "leader.replication.throttled.rate": "long",
    "replica.alter.log.dirs.io.max.bytes.per.second": "long",
}

# Kafka 3.9's defaults of the dynamic keys strom has no field for (nothing behind them here, or
# served another way): DescribeConfigs lists them with these values, as Kafka does. None: null.
UNSERVED_DEFAULTS: dict[str, str | None] = {
    "metric.reporters": "",
    "principal.builder.class": "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    "remote.fetch.max.wait.ms": "500",
    "remote.log.index.file.cache.total.size.bytes": "1073741824",
    "remote.log.manager.copy.max.bytes.per.second": "9223372036854775807",
    "remote.log.manager.fetch.max.bytes.per.second": "9223372036854775807",
    "sasl.jaas.config": None,
    "sasl.kerberos.kinit.cmd": "/usr/bin/kinit",
    "sasl.kerberos.min.time.before.relogin": "60000",
    "sasl.kerberos.principal.to.local.rules": "DEFAULT",
    "sasl.kerberos.service.name": None,
    "sasl.kerberos.ticket.renew.jitter": "0.05",
    "sasl.kerberos.ticket.renew.window.factor": "0.8",
    "sasl.login.refresh.buffer.seconds": "300",
    "sasl.login.refresh.min.period.seconds": "60",
    "sasl.login.refresh.window.factor": "0.8",
    "sasl.login.refresh.window.jitter": "0.05",
    "ssl.engine.factory.class": None,
    "ssl.keymanager.algorithm": "SunX509",
    "ssl.provider": None,
    "ssl.secure.random.implementation": None,
    "ssl.trustmanager.algorithm": "PKIX",
    "transaction.partition.verification.enable": "true",
}

# Listener-prefixed keys that may still be set as the cluster default (Kafka's ClusterLevelListenerConfigs)
CLUSTER_LEVEL_LISTENER_KEYS = frozenset(("max.connections", "max.connection.creation.rate", "num.network.threads"))
# Set only with the listener prefix (Kafka's DynamicSecurityConfigs = SslConfigs.RECONFIGURABLE_CONFIGS)
LISTENER_ONLY_KEYS = frozenset(
    (
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
    )
)
# Kafka's PASSWORD keys among the broker's (a name ending in one of them is a secret too)
PASSWORD_KEYS = frozenset(key for key, kind in DYNAMIC_TYPES.items() if kind == "password") | frozenset(
    (
        "password.encoder.secret",
        "password.encoder.old.secret",
        "delegation.token.secret.key",
        "delegation.token.master.key",
        "zookeeper.ssl.keystore.password",
        "zookeeper.ssl.truststore.password",
        "iceberg.rest.catalog.credential",  # strom's own secrets (config_key(..., sensitive=True))
        "iceberg.rest.catalog.token",
    )
)
DYNAMIC_KEYS = PER_BROKER | CLUSTER_WIDE | QUOTA_KEYS
KNOWN_KEYS = READ_ONLY | DYNAMIC_KEYS

_LISTENER_PREFIX = re.compile(r"^listener\.name\.([^.]*)\.(.+)$")


def listener_key(key: str) -> tuple[str, str] | None:
    """(listener, base key) of ``listener.name.<listener>.<base key>``; None for any other key."""
    match = _LISTENER_PREFIX.match(key)
    return (match.group(1), match.group(2)) if match else None


def base_key(key: str) -> str:
    """The key a listener-prefixed key is a value of (the key itself otherwise)."""
    found = listener_key(key)
    return found[1] if found else key


def update_mode(key: str) -> str | None:
    """Kafka's update mode of a key as AlterConfigs sees it; None for a custom (unknown) key."""
    found = listener_key(key)
    if found is not None:
        return CLUSTER_WIDE_MODE if found[1] in CLUSTER_LEVEL_LISTENER_KEYS else PER_BROKER_MODE
    if key in PER_BROKER:
        return PER_BROKER_MODE
    if key in CLUSTER_WIDE or key in QUOTA_KEYS:
        return CLUSTER_WIDE_MODE
    if key in READ_ONLY:
        return READ_ONLY_MODE
    return None


def is_password(key: str) -> bool:
    """Kafka's DynamicBrokerConfig.isPasswordConfig: the name is, or ends in, a PASSWORD key."""
    return any(key == name or key.endswith("." + name) for name in PASSWORD_KEYS)
