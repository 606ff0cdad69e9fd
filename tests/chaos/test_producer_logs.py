"""The campaign keeps each producer's librdkafka log and reports the producer epoch bumps in it."""

from confluent_kafka import Producer

from strom.chaos.workload import client_logger, client_logging, close_client_logger, epoch_bumps

# as librdkafka 2.16 logs the start of a bump (a run of the fixed-schedule fault test, before the fix
# in strom.server.refused_batches)
BUMP = (
    "DRAIN [rdkafka#producer-6] [thrd:127.0.0.1:43811/1]: Beginning partition drain in state Assigned "
    "for PID{Id:0,Epoch:0} epoch bump for 2 partition(s) with in-flight requests: skipped sequence numbers"
)


def test_a_producer_log_is_kept_and_its_epoch_bumps_are_found(tmp_path):
    logger = client_logger(tmp_path, "producer-0")
    producer = Producer({"bootstrap.servers": "127.0.0.1:9", "enable.idempotence": True, **client_logging(logger)})
    producer.poll(0.2)
    producer.flush(0)
    del producer
    logger.debug(BUMP)
    close_client_logger(logger)
    text = (tmp_path / "producer-0.log").read_text()
    assert "Idempotent producer state change" in text  # the client's own eos debug lines went to the file
    assert epoch_bumps(tmp_path) == [f"producer-0: {line}" for line in text.splitlines() if "epoch bump for" in line]
    assert len(epoch_bumps(tmp_path)) == 1 and epoch_bumps(tmp_path)[0].endswith("skipped sequence numbers")


def test_without_a_directory_the_client_log_is_dropped():
    assert client_logger(None, "producer-0") is None
    assert "debug" not in client_logging(None)
