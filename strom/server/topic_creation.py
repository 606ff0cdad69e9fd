"""Creating a topic on this broker's behalf (CreateTopics, auto.create.topics.enable, the internal
topics), and reading back into its own metadata what it just wrote.

A topic is refused before anything is recorded when this process could not open the files of its
share of the replicas (``strom.resources.descriptor_shortfall``): no half-made topic. The
controller records it; a store failure becomes KAFKA_STORAGE_ERROR (the embedded store's file is in
a full or failed log dir) or stays REQUEST_TIMED_OUT (ZooKeeper stopped answering midway: the topic
may exist unfinished, so everything is read again once it answers and the controller finishes it).

``read_back`` is what every handler that writes znodes calls before it answers: the broker's next
Metadata answer and the controller's next pass see the write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from strom.cluster import model
from strom.cluster.controller import Controller
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.store import StoreError
from strom.protocol.errors import KafkaStorageError, RequestTimedOutError, ResourceExhaustedError
from strom.resources import descriptor_shortfall
from strom.server.config import BrokerConfig
from strom.server.metadata_reload import MetadataReloader

log = logging.getLogger("strom.broker")


class TopicCreation:
    def __init__(
        self,
        broker_id: int,
        metadata: MetadataCache,
        controller: Callable[[], Controller],
        config: Callable[[], BrokerConfig],
        refresh_metadata: Callable[[set[str]], None],
        reloader: MetadataReloader,
    ):
        """``controller()`` and ``config()``: the broker's (made by its start(); replaced by dynamic
        configs). ``refresh_metadata(paths)``: the broker's metadata pass over those znodes.
        ``reloader``: what reads again, once ZooKeeper answers, what could not be read now."""
        self._broker_id = broker_id
        self._metadata = metadata
        self._controller = controller
        self._config = config
        self._refresh_metadata = refresh_metadata
        self._reloader = reloader

    def create(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignment: dict[int, list[int]] | None = None,
        validate_only: bool = False,
    ):
        """The controller's answer (the topic's assignment); raises the Kafka error it maps to."""
        local = (
            sum(1 for replicas in assignment.values() if self._broker_id in replicas)
            if assignment
            else -(-partitions * max(1, replication_factor) // max(1, len(self._metadata.brokers)))
        )
        shortfall = descriptor_shortfall(local)
        if shortfall is not None:  # refused before anything is recorded: no half-made topic
            raise ResourceExhaustedError(f"topic '{name}' was not created: {shortfall}")
        try:
            created = self._controller().create_topic(
                name, partitions, replication_factor, configs, assignment, validate_only=validate_only
            )
        except OSError as exc:  # the single-node store's file is in a full or failed log dir
            raise KafkaStorageError(f"topic '{name}' could not be recorded: {exc.strerror or exc}") from exc
        except RequestTimedOutError:  # ZooKeeper stopped answering midway: the topic may exist, unfinished
            self._reloader.schedule()  # everything, once it answers: the controller finishes the topic
            raise
        if not validate_only:  # the new topic alone, not every partition of the cluster again
            self.read_back({model.BROKERS_TOPICS, model.topic_path(name)})
        return created

    def auto_create(self, name: str):
        """auto.create.topics.enable: a topic first named by Metadata gets the broker defaults."""
        config = self._config()
        factor = min(config.default_replication_factor, max(1, len(self._metadata.brokers)))
        return self.create(name, config.num_partitions, factor)

    def read_back(self, written: set[str]) -> None:
        """Show what this broker just wrote in its own metadata before it answers the request.

        The znodes whose watches fired and whose reload is not applied yet are read with them:
        the controller's pass after the write decides from this cache, and a broker registered
        a moment ago must count as alive there (or the new topic's leaders move off it at once).
        A store that stops answering after the write does not undo it: the request succeeded,
        and those znodes are read again once ZooKeeper answers (a reload retries until it does).
        """
        try:
            self._refresh_metadata(written | self._reloader.unapplied_changes())
        except StoreError as exc:
            log.warning(
                "could not read back %s after writing it (%s); reloading once ZooKeeper answers", sorted(written), exc
            )
            for path in written:
                self._reloader.schedule(path)
