"""Copies replicas into other log dirs of this broker (Kafka's ReplicaAlterLogDirsThread).

AlterReplicaLogDirs makes an empty future log in the destination dir (LogDirMoves.alter_log_dir in strom.storage.log_dir_moves);
this task fills it from the current log, batch by batch up to the current log end, while the
partition keeps serving reads and writes from the current log. When a step finds the copy at the
current log end it swaps it in on the spot: the step is synchronous on the event loop, so no
append comes between the last copied batch and the swap, and nothing written during the move is
lost. A truncation of the current log (a follower diverging from a new leader) or a log start
that moved past the copy starts the copy again. The dynamic broker config
``replica.alter.log.dirs.io.max.bytes.per.second`` limits the copy, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from strom.protocol.errors import KafkaError, KafkaStorageError
from strom.protocol.records import complete_batches_end
from strom.replication.throttle import Quota

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache
    from strom.replication.replica_manager import ReplicaManager
    from strom.storage.log import Log
    from strom.storage.log_manager import LogManager

log = logging.getLogger("strom.replication")

RATE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"
CHUNK_BYTES = 1024 * 1024  # per step and partition; the loop serves requests between steps
THROTTLED_WAIT_S = 0.05


class LogDirMover:
    def __init__(self, log_manager: LogManager, replicas: ReplicaManager, metadata: MetadataCache, broker_id: int):
        self.log_manager = log_manager
        self.replicas = replicas
        self.metadata = metadata
        self.broker_id = broker_id
        self.quota = Quota()
        self._wake = asyncio.Event()
        # the (current, future) pair being copied and the current log's truncation count when it began
        self._copying: dict[tuple[str, int], tuple[Log, Log, int]] = {}

    def wake(self) -> None:
        """A move was asked for: start copying now."""
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                if not self.log_manager.moves.future_logs:
                    self._copying.clear()
                    self._wake.clear()
                    waking = asyncio.ensure_future(self._wake.wait())
                    await asyncio.wait((stopping, waking), return_when=asyncio.FIRST_COMPLETED)
                    waking.cancel()
                    continue
                if self.step() or not self.log_manager.moves.future_logs:
                    await asyncio.sleep(0)  # let requests in between chunks
                else:
                    await asyncio.wait((stopping,), timeout=THROTTLED_WAIT_S)
        finally:
            stopping.cancel()

    def _update_rate(self) -> None:
        configs = self.metadata.broker_configs
        for entity in (str(self.broker_id), "<default>"):
            value = configs.get(entity, {}).get(RATE_KEY)
            if value is not None:
                try:
                    self.quota.set_rate(max(1, int(value)))
                except ValueError:
                    self.quota.set_rate(None)
                return
        self.quota.set_rate(None)

    def step(self) -> bool:
        """One round over the moving replicas; whether any copied a batch or was swapped in."""
        self._update_rate()
        progressed = False
        for tp in list(self.log_manager.moves.future_logs):
            allowance = self.quota.allowance()
            if allowance <= 0:
                break
            try:
                progressed |= self._step(tp, min(CHUNK_BYTES, allowance))
            except KafkaStorageError:
                self._copying.pop(tp, None)  # reported: the dir that failed is offline, the move stopped
        return progressed

    def _step(self, tp: tuple[str, int], max_bytes: int) -> bool:
        manager = self.log_manager
        current, future = manager.logs.get(tp), manager.moves.future_logs.get(tp)
        if current is None or future is None:
            return False
        began = self._copying.get(tp)
        if began is None or began[0] is not current or began[1] is not future:
            began = self._copying[tp] = (current, future, current.truncations)
        if began[2] != current.truncations or not (
            current.log_start_offset <= future.log_end_offset <= current.log_end_offset
        ):
            log.info("%s-%d changed under its copy: copying it again from offset %d", *tp, current.log_start_offset)
            self._guard_future(tp, lambda: manager.moves.restart_future_log(tp))
            self._copying[tp] = (current, future, current.truncations)
        if future.log_end_offset >= current.log_end_offset:
            self._copying.pop(tp, None)
            moved = manager.moves.replace_current_with_future(tp)
            partition = self.replicas.partitions.get(tp)
            if partition is not None:
                partition.log = moved
                self.replicas.purgatory.notify(tp)  # waiting fetches and produces read the new log
            return True
        try:
            data = current.read(future.log_end_offset, max_bytes, current.log_end_offset)
            chunk = b"".join(s.read() for s in data.slices)
        except OSError as exc:
            raise manager.storage_error(tp, exc, "copying") from exc
        whole, _ = complete_batches_end(chunk)
        if not whole:
            return False
        try:
            self._guard_future(tp, lambda: future.append_as_follower(memoryview(chunk)[:whole]))
        except KafkaStorageError:
            raise
        except KafkaError as exc:  # what the current log holds does not fit the copy: start it again
            log.warning("%s-%d: copy to %s failed (%s); starting it again", *tp, future.directory, exc)
            self._copying.pop(tp, None)
            self._guard_future(tp, lambda: manager.moves.restart_future_log(tp))
            return False
        self.quota.record(whole)
        return True

    def _guard_future(self, tp: tuple[str, int], action: Callable[[], object]) -> None:
        """Run a write to the future log; an I/O error takes the destination dir offline."""
        try:
            action()
        except OSError as exc:
            log_dir = self.log_manager.moves.future_log_dir_of(tp)
            if log_dir is None:
                raise
            raise self.log_manager.moves.future_storage_error(log_dir, exc, f"copying {tp[0]}-{tp[1]}") from exc
