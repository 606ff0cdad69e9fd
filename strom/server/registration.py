"""This broker's registration and its ZooKeeper session.

The ephemeral ``/brokers/ids/<id>`` (strom.cluster.model.Broker: endpoints, rack, Schema Registry
URL, offline replicas) is how the cluster knows this broker is alive: it is created at startup,
rewritten when replicas go offline (so the controller moves them) or the listeners change, and
made again in a new session after an expiry, tried every REREGISTER_RETRY_S until ZooKeeper answers.

While the session cannot be confirmed the broker is fenced (KRaft's broker fencing): it answers
NOT_LEADER_OR_FOLLOWER and claims no leadership, and is unfenced once the session is confirmed
and a metadata pass has succeeded (``unfence_if_confirmed``, the metadata reloader's hook). The
broker gives this class its id, store, replica manager, controller, config, loop and stop event,
and a way to ask for a metadata reload.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

from strom.cluster import model
from strom.cluster.controller import Controller
from strom.cluster.model import Broker as BrokerInfo
from strom.cluster.store import MetadataStore, NodeExistsError, StoreError
from strom.replication.replica_manager import ReplicaManager
from strom.server.config import BrokerConfig

log = logging.getLogger("strom.broker")

# a registration (after a session expiry, or listing offline replicas) that ZooKeeper did not
# answer is tried again this often
REREGISTER_RETRY_S = 1.0


class BrokerRegistration:
    def __init__(
        self,
        broker_id: int,
        store: Callable[[], MetadataStore],
        replicas: Callable[[], ReplicaManager],
        controller: Callable[[], Controller],
        config: Callable[[], BrokerConfig],
        loop: Callable[[], asyncio.AbstractEventLoop],
        stop: asyncio.Event,
        schedule_reload: Callable[[], None],
    ):
        """``store``, ``replicas``, ``controller`` and ``loop``: the broker's, made by its start()
        (None until then); ``schedule_reload()`` re-reads all the metadata soon."""
        self._broker_id = broker_id
        self._store = store
        self._replicas = replicas
        self._controller = controller
        self._config = config
        self._loop = loop
        self._stop = stop
        self._schedule_reload = schedule_reload
        self.info = BrokerInfo(broker_id, "", -1)  # what the znode says: set by the broker's start()
        self._reregister_handle: asyncio.TimerHandle | None = None
        self._publish_handle: asyncio.TimerHandle | None = None  # a retry of publish_offline_replicas
        self._published_offline: frozenset = frozenset()  # the offline replicas the registration znode lists
        self._unfence_after_reload = False

    def publish_endpoints(self, endpoints: tuple, protocols: tuple) -> bool:
        """The listeners changed: rewrite the registration with their endpoints. False when they are
        the same, or ZooKeeper did not answer (a new session registers again with these endpoints)."""
        if endpoints == self.info.endpoints:
            return False
        self.info = dataclasses.replace(self.info, endpoints=endpoints, protocols=protocols)
        try:
            self._store().set(model.broker_path(self._broker_id), self.info.to_json())
        except StoreError as exc:
            log.warning("could not publish the new endpoints of broker %d (%s)", self._broker_id, exc)
            return False
        return True

    def close(self) -> None:
        for handle in (self._reregister_handle, self._publish_handle):
            if handle is not None:
                handle.cancel()
        self._reregister_handle = self._publish_handle = None

    def register(self, wait_s: float = 0.0) -> None:
        """The ephemeral /brokers/ids/<id>: this broker counts as alive exactly while it exists.

        After a crash and a quick restart the node still belongs to the dead process's session
        until ZooKeeper expires it, so startup waits up to the session timeout for it to go
        (Kafka does the same, KAFKA-7165); a node that outlives that belongs to a live broker.
        """
        path = model.broker_path(self._broker_id)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._store().create(path, self.info.to_json(), ephemeral=True)
                break
            except NodeExistsError:
                if self._store().ephemeral_owned(path):  # made by a try whose answer a dropped connection lost
                    break
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"broker.id={self._broker_id} is already registered by another live broker"
                    ) from None
                time.sleep(0.2)
        self._published_offline = self.info.offline_replicas

    def publish_offline_replicas(self) -> None:
        """List this broker's offline replicas in its registration, so the controller moves them.

        The registration is what a new ZooKeeper session re-creates, so the list outlives a
        session expiry; a restart registers afresh, with the replicas back online. A write that
        ZooKeeper does not answer is tried again every second until the znode lists them: within
        one session nothing else would write it, and the controller would leave those partitions
        led by a broker that can only answer KAFKA_STORAGE_ERROR.
        """
        if self._publish_handle is not None:
            self._publish_handle.cancel()
            self._publish_handle = None
        if self._stop.is_set():
            return
        offline = frozenset(self._replicas().offline)
        if offline != self.info.offline_replicas:
            self.info = dataclasses.replace(self.info, offline_replicas=offline)
        if offline == self._published_offline:
            return
        try:
            self._store().set(model.broker_path(self._broker_id), self.info.to_json())
        except StoreError as exc:  # also NoNode while a new session has not registered again yet
            log.warning(
                "could not publish %d offline replicas (%s); trying again in %.0fs",
                len(offline),
                exc,
                REREGISTER_RETRY_S,
            )
            self._publish_handle = self._loop().call_later(REREGISTER_RETRY_S, self.publish_offline_replicas)
            return
        self._published_offline = offline
        log.info("broker %d told the controller that %d replicas are offline", self._broker_id, len(offline))

    def on_session_event(self, event: str) -> None:
        """ZooKeeper session lost / re-established (kazoo's thread): hop to the loop."""
        self._loop().call_soon_threadsafe(self._handle_session_event, event)

    def check_session(self) -> None:
        """Fence this broker while its ZooKeeper session cannot be confirmed (KRaft's broker fencing).

        ZooKeeper expires a silent session after zookeeper.session.timeout.ms, and the controller
        then elects other leaders; a broker cut off from ZooKeeper but not from its clients would
        go on answering as leader, acknowledging nothing (acks=all) or, worse, serving stale
        reads. The client notices a dropped connection about two thirds into the timeout, so a
        broker unconfirmed for a third of it more is fenced about when the session expires: it
        answers NOT_LEADER_OR_FOLLOWER and claims no leadership in Metadata, and clients move.
        It is unfenced once the session is confirmed and metadata has been reloaded.
        """
        replicas = self._replicas()
        now, cpu = time.monotonic(), time.process_time()
        last, last_cpu = replicas.session_checked_at, replicas.session_checked_cpu
        replicas.session_checked_at, replicas.session_checked_cpu = now, cpu
        if last is not None and now - last > replicas.stall_fence_s and cpu - last_cpu < (now - last) / 2:
            self._fence(f"it was stopped for {now - last:.1f}s (paused?) and must confirm its session again")
            return
        unconfirmed = self._store().unconfirmed_for()
        if not replicas.fenced and unconfirmed > self._config().zookeeper_session_timeout_ms / 3000:
            self._fence(f"its ZooKeeper session is unconfirmed for {min(unconfirmed, 1e9):.1f}s")
        elif replicas.fenced and unconfirmed == 0 and not self._unfence_after_reload:
            self._unfence_after_reload = True
            self._schedule_reload()

    def _fence(self, reason: str) -> None:
        if self._replicas().fenced:
            return
        log.warning("broker %d fenced: %s; it leads nothing until the session is confirmed", self._broker_id, reason)
        self._replicas().fenced = True
        self._unfence_after_reload = False
        for key in list(self._replicas().partitions):
            self._replicas().purgatory.notify(key)  # waiting produces and fetches re-check leadership

    def _handle_session_event(self, event: str) -> None:
        if self._controller() is None:  # start() failed before making it: nothing to do
            return
        if event == "lost":
            self._fence("its ZooKeeper session expired")
            self._controller().resign()
        elif event == "connected":
            log.info("re-registering broker %d after a ZooKeeper session expiry", self._broker_id)
            self._reregister()

    def _reregister(self) -> None:
        """Register again in a new session, and stand for controller, until ZooKeeper has answered.

        The new session may lose its connection before the registration is through (a flaky
        link drops it again at once). kazoo then reconnects to the same session and says nothing
        more, so a registration tried once would leave the broker alive but unregistered for
        good: no leader for its partitions, out of every ISR. It is tried again every second.
        """
        if self._reregister_handle is not None:
            self._reregister_handle.cancel()
            self._reregister_handle = None
        if self._stop.is_set():
            return
        try:
            self.register()
            self._controller().elect()
        except (StoreError, RuntimeError) as exc:
            log.warning(
                "could not re-register broker %d (%s); trying again in %.0fs", self._broker_id, exc, REREGISTER_RETRY_S
            )
            self._reregister_handle = self._loop().call_later(REREGISTER_RETRY_S, self._reregister)
            return
        log.info("broker %d registered again", self._broker_id)
        self._schedule_reload()

    def unfence_if_confirmed(self) -> None:
        """After a metadata pass: a fenced broker whose session is confirmed again leads again."""
        if self._unfence_after_reload and self._store().unconfirmed_for() == 0:
            self._unfence_after_reload = False
            self._replicas().fenced = False
            log.info("broker %d unfenced: ZooKeeper session confirmed and metadata reloaded", self._broker_id)
