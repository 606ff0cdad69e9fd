"""/brokers/ids/<id> as Kafka writes it: every endpoint, each listener's protocol, host/port of the PLAINTEXT one."""

import json

from strom.cluster.model import Broker


def test_every_endpoint_and_the_protocol_map():
    broker = Broker(
        3,
        "10.0.0.3",
        9092,
        "r1",
        endpoints=(("CLIENT", "10.0.0.3", 9092), ("INTERNAL", "::1", 9093)),
        protocols=(("CLIENT", "PLAINTEXT"), ("INTERNAL", "SASL_SSL")),
    )
    value = json.loads(broker.to_json())
    assert value["endpoints"] == ["CLIENT://10.0.0.3:9092", "INTERNAL://[::1]:9093"]
    assert value["listener_security_protocol_map"] == {"CLIENT": "PLAINTEXT", "INTERNAL": "SASL_SSL"}
    assert (value["host"], value["port"], value["rack"], value["version"]) == ("10.0.0.3", 9092, "r1", 5)
    read = Broker.from_json(3, broker.to_json())
    assert read.endpoint("INTERNAL") == ("::1", 9093) and read.endpoint("CLIENT") == ("10.0.0.3", 9092)
    assert read.endpoint("OTHER") is None


def test_no_plaintext_listener_means_null_host_as_in_kafka():
    broker = Broker(1, "h", 9094, endpoints=(("SASL_SSL", "h", 9094),), protocols=(("SASL_SSL", "SASL_SSL"),))
    value = json.loads(broker.to_json())
    assert (value["host"], value["port"]) == (None, -1)
    assert Broker.from_json(1, broker.to_json()).endpoint("SASL_SSL") == ("h", 9094)


def test_a_registration_without_endpoints_is_one_plaintext_listener():
    broker = Broker(0, "127.0.0.1", 9092)
    assert json.loads(broker.to_json())["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert broker.endpoint("PLAINTEXT") == ("127.0.0.1", 9092)
