"""The broker's metadata store at startup: opening it (ZooKeeper with ``zookeeper.connect``, else
the embedded store in the first log dir), reading or creating the cluster id, and retrying each
startup step that talks to ZooKeeper while it does not answer.

Every refusal is a StartupError naming the key to look at: a log dir that cannot be written (a
disk that filled up since the log dirs were checked), an embedded store whose file is damaged, a
ZooKeeper that does not answer within zookeeper.connection.timeout.ms. The broker gives this
module its config and the first log dir's lock (the embedded store lives under it).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from typing import TypeVar

from strom.cluster import model
from strom.cluster.local_store import DamagedStoreError, LocalStore
from strom.cluster.store import MetadataStore, NodeExistsError
from strom.cluster.store_retry import retry_unavailable
from strom.server.config import BrokerConfig
from strom.startup import StartupError
from strom.storage import dir_lock

T = TypeVar("T")


def open_store(config: BrokerConfig, first_dir_lock: dir_lock.DirLock) -> tuple[MetadataStore, str]:
    """The store and the cluster id (read, or created by the first broker of the cluster)."""
    try:
        for log_dir in config.log_dirs:
            os.makedirs(log_dir, exist_ok=True)
        store: MetadataStore
        if config.zookeeper_connect:
            from strom.cluster.zk_store import ZkStore

            store = ZkStore(
                config.zookeeper_connect, config.zookeeper_session_timeout_ms, config.zookeeper_connection_timeout_ms
            )
        else:
            store = LocalStore(config.log_dirs[0], first_dir_lock)
        # a ZooKeeper that stalls right after the session is up gets zookeeper.connection.timeout.ms,
        # as the connection did; the embedded store writes its file in the first log dir
        return store, startup_step(config, "reading the cluster id", lambda: cluster_id(store))
    except OSError as exc:  # a disk that filled up since check_log_dirs, a store file's read error
        where = f" {exc.filename}" if exc.filename else f" in {config.log_dirs[0]}"
        raise StartupError("log.dirs", f"cannot write{where}: {exc.strerror or exc}") from exc
    except DamagedStoreError as exc:
        raise StartupError(
            "log.dirs",
            f"the embedded metadata store {exc}: restore it from a backup, or move it away to start "
            "with empty cluster metadata",
        ) from exc


def cluster_id(store: MetadataStore) -> str:
    """/cluster/id's id, created when no broker has made it yet (the first of two racing wins)."""
    found = store.get_or_none(model.CLUSTER_ID)
    if found is None:
        made = model.base64url_uuid(uuid.uuid4())
        try:
            store.create(model.CLUSTER_ID, json.dumps({"version": "1", "id": made}).encode(), makepath=True)
        except NodeExistsError:
            pass
        found = store.get(model.CLUSTER_ID)
    return json.loads(found[0])["id"]


def startup_step(config: BrokerConfig, what: str, step: Callable[[], T]) -> T:
    """A step of startup that talks to ZooKeeper, tried again while ZooKeeper does not answer
    (its connection dropped, its session expired) for up to zookeeper.connection.timeout.ms,
    as Kafka's broker does; past that, startup fails naming the key. The embedded store has
    nothing to wait for."""
    connect = config.zookeeper_connect
    if not connect:
        return step()
    return retry_unavailable(step, what, config.zookeeper_connection_timeout_ms, connect)
