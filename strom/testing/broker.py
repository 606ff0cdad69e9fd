"""A single strom broker for a test: ``with strom.testing.Broker() as broker:``."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from strom.testing.client import KafkaHelpers
from strom.testing.nodes import START_TIMEOUT_S, ProcessNode, ThreadNode


class Broker(KafkaHelpers):
    """One broker on 127.0.0.1 and a free port, data in ``data_dir`` (a temporary directory,
    removed on stop, when not given).

    ``in_process=True`` runs it on a thread of this process (fastest start; ``kill`` then stops it
    as a crash would rather than with a signal). ``overrides`` are broker configs, as
    ``strom server-start --override`` takes them. ``ready_s`` is how long the last start took,
    from the call to a broker accepting connections.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        overrides: dict[str, str] | None = None,
        *,
        in_process: bool = False,
        broker_id: int = 0,
    ):
        self._owns_dir = data_dir is None
        self.dir = Path(tempfile.mkdtemp(prefix="strom-broker-") if data_dir is None else data_dir)
        node_class = ThreadNode if in_process else ProcessNode
        self.node = node_class(broker_id, self.dir / "data", dict(overrides or {}))
        self.in_process = in_process
        self.broker_id = broker_id
        self.ready_s = 0.0

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.node.port}"

    @property
    def broker_ids(self) -> list[int]:
        return [self.broker_id]

    @property
    def log_path(self) -> Path | None:
        """The broker's own log file (None in process: its records go to the ``strom`` loggers)."""
        return self.node.log_path

    def start(self, timeout: float = START_TIMEOUT_S) -> Broker:
        began = time.perf_counter()
        self.node.start(timeout)
        self.ready_s = time.perf_counter() - began
        return self

    def stop(self) -> None:
        """Shut down cleanly and drop the clients; a temporary data dir is removed."""
        self._close_clients()
        self.node.stop()
        if self._owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _check(self, broker_id: int | None) -> None:
        if broker_id is not None and broker_id != self.broker_id:
            raise ValueError(f"no broker {broker_id}: this is broker {self.broker_id}")

    def kill(self, broker_id: int | None = None) -> None:
        """kill -9 the broker (in process: stop it as a crash would)."""
        self._check(broker_id)
        self.node.kill()

    def restart(self, broker_id: int | None = None, timeout: float = START_TIMEOUT_S) -> None:
        """Start it again on the same port and data (a running broker is stopped cleanly first)."""
        self._check(broker_id)
        self.node.stop()
        self.start(timeout)

    def alive(self, broker_id: int | None = None) -> bool:
        self._check(broker_id)
        return self.node.alive

    def __repr__(self) -> str:
        mode = "in-process" if self.in_process else "process"
        return f"<strom.testing.Broker {self.broker_id} {mode} {self.bootstrap_servers} {self.dir}>"
