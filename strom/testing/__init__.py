"""Real Kafka-compatible brokers for an application's tests, with no JVM or download for a broker.

    from strom.testing import Broker, Cluster

    with Broker() as broker:                      # a `strom server-start` child process
        broker.create_topic("orders", partitions=3)
        broker.produce("orders", [b"v1", ("key", "v2")])
        records = broker.consume("orders", 2, timeout=10)

    with Broker(in_process=True) as broker: ...   # a thread of this process: the fastest start
    with Cluster() as cluster: ...                # ZooKeeper + brokers 1, 2, 3; cluster.kill(2)

Under pytest the same objects come from the fixtures ``strom_broker`` and ``strom_cluster``
(strom.testing.plugin, registered through the ``pytest11`` entry point).
"""

from strom.testing.broker import Broker
from strom.testing.client import Record
from strom.testing.cluster import Cluster

__all__ = ["Broker", "Cluster", "Record"]
