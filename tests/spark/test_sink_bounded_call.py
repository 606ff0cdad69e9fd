"""The sink's guard around transactional calls that librdkafka may never return from (librdkafka#5511)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from strom.spark.sink import bounded_call


def test_a_call_that_never_returns_fails_the_task_with_a_timeout_naming_the_client_bug():
    never = threading.Event()

    def send_offsets_to_transaction(*_args):
        never.wait()  # what librdkafka does when its group coordinator has left the cluster

    with pytest.raises(TimeoutError, match=r"send_offsets_to_transaction did not return within 0 s.*#5511"):
        bounded_call(send_offsets_to_transaction, ["marker"], "group", timeout_s=0.2)
    never.set()


def test_results_and_client_errors_pass_through_unchanged():
    assert bounded_call(lambda a, b: a + b, 2, 3) == 5
    error = KafkaException(KafkaError(KafkaError._FENCED, "fenced"))

    def fenced():
        raise error

    with pytest.raises(KafkaException) as raised:
        bounded_call(fenced)
    assert raised.value is error
