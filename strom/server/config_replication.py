"""The broker's replication keys: followers' fetching and the ISR (``replica.*``,
``num.replica.fetchers``), leader balance, controlled shutdown, and the fetch limits of consumers
(``fetch.max.bytes``, the incremental fetch session cache).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.server.config_keys import config_key, int_range, long_range
from strom.storage.log_config import parse_bool


@dataclass(frozen=True)
class ReplicationKeys:
    """Replica fetching, the ISR, leader balance, controlled shutdown and consumer fetch limits."""

    # --- replication
    replica_lag_time_max_ms: int = config_key(
        "replica.lag.time.max.ms", 30000, long_range(1), "A follower not caught up for this long leaves the ISR."
    )
    replica_fetch_max_bytes: int = config_key(
        "replica.fetch.max.bytes", 1048576, int_range(0), "Bytes a follower asks for per partition."
    )
    replica_fetch_response_max_bytes: int = config_key(
        "replica.fetch.response.max.bytes", 10485760, int_range(0), "Bytes a follower asks for per fetch response."
    )
    replica_fetch_wait_max_ms: int = config_key(
        "replica.fetch.wait.max.ms", 500, int_range(0), "Longest a follower's fetch waits at the leader for data."
    )
    replica_fetch_min_bytes: int = config_key(
        "replica.fetch.min.bytes", 1, int_range(1), "Bytes a follower's fetch waits for."
    )
    replica_fetch_backoff_ms: int = config_key(
        "replica.fetch.backoff.ms", 1000, int_range(0), "Sleep of a follower after a fetch error."
    )
    replica_socket_timeout_ms: int = config_key(
        "replica.socket.timeout.ms", 30000, int_range(1), "Socket timeout of follower fetches."
    )
    replica_high_watermark_checkpoint_interval_ms: int = config_key(
        "replica.high.watermark.checkpoint.interval.ms",
        5000,
        long_range(1),
        "How often high watermarks are checkpointed.",
    )
    num_replica_fetchers: int = config_key(
        "num.replica.fetchers", 1, int_range(1), "Fetcher connections per source broker."
    )
    auto_leader_rebalance_enable: bool = config_key(
        "auto.leader.rebalance.enable", True, parse_bool, "Move leadership back to preferred replicas."
    )
    leader_imbalance_check_interval_seconds: int = config_key(
        "leader.imbalance.check.interval.seconds", 300, long_range(1), "How often the controller checks leader balance."
    )
    leader_imbalance_per_broker_percentage: int = config_key(
        "leader.imbalance.per.broker.percentage", 10, int_range(0), "Imbalance per broker that triggers a rebalance."
    )
    # --- controlled shutdown
    controlled_shutdown_enable: bool = config_key(
        "controlled.shutdown.enable", True, parse_bool, "Move leadership away before shutting down."
    )
    controlled_shutdown_max_retries: int = config_key(
        "controlled.shutdown.max.retries", 3, int_range(0), "Attempts of a controlled shutdown."
    )
    controlled_shutdown_retry_backoff_ms: int = config_key(
        "controlled.shutdown.retry.backoff.ms", 5000, long_range(0), "Sleep between controlled shutdown attempts."
    )
    # --- fetch
    # Kafka's default is 55 MiB. A response of 8 MiB keeps librdkafka's local queue below its
    # queued.min.messages (100,000 records) with 100-byte records; a larger one over many
    # partitions fills it and every partition waits out fetch.queue.backoff.ms (1 s).
    fetch_max_bytes: int = config_key(
        "fetch.max.bytes", 8388608, int_range(1024), "Largest fetch response the broker builds for a consumer."
    )
    max_incremental_fetch_session_cache_slots: int = config_key(
        "max.incremental.fetch.session.cache.slots",
        1000,
        int_range(0),
        "Incremental fetch sessions kept by the broker.",
    )
    min_incremental_fetch_session_eviction_ms: int = config_key(
        "min.incremental.fetch.session.eviction.ms",
        120000,
        int_range(0),
        "A fetch session this young is evicted from a full cache only by a follower's (Kafka's constant).",
    )
