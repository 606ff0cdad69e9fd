"""This broker's part in the controller's work: standing for controller when the office is empty,
and, while it holds the office, the controller's reconcile passes after each metadata pass.

With ZooKeeper both the election and the writes of a pass go to the controller writer thread (made
on first use), as a reload's reads go to the reader thread: a ZooKeeper that stops answering while
the controller elects leaders held every request of this broker meanwhile. One pass writes at a
time; a pass asked for meanwhile runs when those writes are in, over the partitions it would have
looked at. At startup the broker waits for the election's outcome, as for everything else it reads
then. The decisions themselves are strom.cluster.controller's; the broker gives this class the
controller, its cache, store and replica manager, and what to do when a write's outcome is unknown
(read everything again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from strom.cluster.controller import Controller, Election, ReconcilePlan
from strom.cluster.metadata_cache import MetadataCache, MetadataDelta
from strom.cluster.store import MetadataStore, StoreError
from strom.loop_handoff import handoff_loop, on_loop_when_done
from strom.replication.replica_manager import ReplicaManager

log = logging.getLogger("strom.broker")


class ControllerRole:
    def __init__(
        self,
        controller: Callable[[], Controller],
        metadata: MetadataCache,
        store: Callable[[], MetadataStore],
        replicas: Callable[[], ReplicaManager],
        unclean_enabled: Callable[[str], bool],
        reload_everything: Callable[[], None],
        starting: Callable[[], bool],
        stop: asyncio.Event,
    ):
        """``controller``, ``store`` and ``replicas``: the broker's, made by its start().
        ``unclean_enabled(topic)``: the topic's unclean.leader.election.enable. ``starting()``:
        whether the broker is still reading the cluster metadata at startup."""
        self._controller = controller
        self._metadata = metadata
        self._store = store
        self._replicas = replicas
        self._unclean_enabled = unclean_enabled
        self._reload_everything = reload_everything
        self._starting = starting
        self._stop = stop
        self._writer_thread: ThreadPoolExecutor | None = None  # stands for controller, writes its decisions
        self._writes: Future | None = None  # the pass whose writes are under way
        self._election: Future | None = None  # this broker standing for controller
        self._waiting = False  # a pass was asked for while they were
        self._everything = False  # ... over every partition
        self._reconciled_epoch = -1  # the controller epoch of the last pass over every partition

    def after_metadata_pass(self, delta: MetadataDelta) -> list[str]:
        """Stand for an empty office; as controller, a pass over what ``delta`` changed (over every
        partition for a new controller: its predecessor may have died half-way). Returns the paths
        written; the partitions they changed are added to ``delta``."""
        controller = self._controller()
        written: list[str] = []
        if not controller.is_active and self._metadata.controller_id == -1:
            self._elect()
        if controller.is_active:
            everything = delta.full or self._reconciled_epoch != controller.epoch
            written = self._reconcile(None if everything else delta)
            self._reconciled_epoch = controller.epoch
            delta.partitions |= self._metadata.take_written()
        return written

    def close(self) -> None:
        """Calls still waiting for ZooKeeper end with the store's close."""
        if self._writer_thread is not None:
            self._writer_thread.shutdown(wait=False, cancel_futures=True)

    def _elect(self) -> None:
        """Stand for controller (the office is empty); with ZooKeeper on the controller writer thread."""
        controller = self._controller()
        loop = None if self._starting() else handoff_loop(self._store())
        if loop is None:
            self._take_office(controller.campaign(controller.is_active))
            return
        if self._election is not None:
            return  # one under way already
        self._election = self._writer().submit(controller.campaign, controller.is_active)
        on_loop_when_done(self._election, loop, self._elected)

    def _elected(self, future: Future) -> None:
        self._election = None
        if self._stop.is_set():
            return
        error = future.exception()
        if error is not None:  # the next reload stands again if the office is still empty
            log.warning("standing for controller failed (%s); reloading metadata", error)
            self._reload_everything()
            return
        if self._take_office(future.result()):
            # a new controller looks at every partition: its predecessor may have died half-way
            self._reconcile(None)
            self._reconciled_epoch = self._controller().epoch

    def _writer(self) -> ThreadPoolExecutor:
        if self._writer_thread is None:
            self._writer_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strom-controller-writer")
        return self._writer_thread

    def _take_office(self, election: Election) -> bool:
        self._metadata.controller_id = election.holder
        return self._controller().take_office(election)

    def _reconcile(self, delta: MetadataDelta | None) -> list[str]:
        """The controller's pass over what changed (everything with None); returns the paths written."""
        controller = self._controller()
        if self._writes is not None:
            if delta is None:
                self._everything = True
            else:
                controller.look_again(delta.partitions | self._metadata.partitions_of_brokers(delta.brokers))
            self._waiting = True
            return []
        if self._everything:  # a pass over everything was asked for while writes were under way
            delta = None
        self._waiting = self._everything = False
        plan = controller.plan(self._metadata, self._unclean_enabled, delta)
        written: list[str] = []
        if plan:
            loop = handoff_loop(self._store())
            if loop is None:
                written = controller.apply(self._metadata, plan, controller.write(plan))
            else:
                self._writes = self._writer().submit(controller.write, plan)
                on_loop_when_done(self._writes, loop, self._plan_written, plan)
        return written + controller.complete_reassignments(self._metadata)

    def _plan_written(self, plan: ReconcilePlan, future: Future) -> None:
        """The controller's writes are in (on the loop): into the cache, the replicas, and the next pass."""
        self._writes = None
        if self._stop.is_set():
            return
        controller = self._controller()
        error = future.exception()
        if error is None:  # what ZooKeeper took holds, whether or not this broker is still controller
            controller.apply(self._metadata, plan, future.result())
        else:
            controller.look_again(plan.keys())
            if isinstance(error, StoreError):  # unknown which took effect: read everything again
                log.warning("the controller's writes got no answer (%s); reloading metadata", error)
            else:
                log.error("the controller's writes failed", exc_info=error)
            self._reload_everything()
        partitions = self._metadata.take_written()
        if partitions:
            self._replicas().apply_metadata(partitions)
        if self._waiting and error is None and controller.is_active:
            self._reconcile(MetadataDelta())  # over what it was asked to look at meanwhile
