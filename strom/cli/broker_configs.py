"""``strom configs --entity-type brokers``: a broker's dynamic configs (KIP-226) and the cluster default.

    strom configs --bootstrap-server H:P --entity-type brokers --entity-default --alter \\
        --add-config log.cleaner.threads=2,max.connections.per.ip=100
    strom configs --bootstrap-server H:P --entity-type brokers --entity-default --describe
    strom configs --bootstrap-server H:P --entity-type brokers --entity-name 1 --describe [--all]

Kafka names the cluster default with a broker resource whose name is empty; librdkafka (and
kafka-python) refuse such a resource, so its DescribeConfigs and IncrementalAlterConfigs go over
strom's own client connection (client_quotas.QuotaClient), secured from the same --command-config
properties. A named broker is described the same way, on a connection to that broker (each broker
describes itself): librdkafka keeps a config's synonyms in a dict by name, which loses all but one
of ``log.cleaner.threads`` set on the broker, as the default and built in. The output is
kafka-configs.sh's: ``Default configs for brokers in the cluster are:`` (``Dynamic configs for
broker 1 are:``, ``All configs ...`` with --all) and one ``  name=value sensitive=false
synonyms={DYNAMIC_BROKER_CONFIG:name=value, DYNAMIC_DEFAULT_BROKER_CONFIG:name=value, ...}`` line per key.
"""

from __future__ import annotations

from strom.cli.client_props import ToolError
from strom.cli.client_quotas import QuotaClient
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode

BROKER = 4  # ConfigResource.Type
SET, DELETE = 0, 1
DYNAMIC_BROKER_CONFIG = 2
SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


def _failed(code: int, message: str | None) -> ToolError:
    return ToolError(f"Error while executing config command: {message or ErrorCode.from_wire(code).name}")


def _show(value: str | None) -> str:
    return "null" if value is None else value


def entries(client: QuotaClient, name: str = "") -> list:
    """Broker ``name``'s configs ("": the cluster default), as the broker the client is connected to describes them."""
    body = {"resources": [{"resource_type": BROKER, "resource_name": name, "configuration_keys": None}]}
    response = client.request(ApiKey.DESCRIBE_CONFIGS, {**body, "include_synonyms": True})
    [result] = response.results
    if result.error_code != ErrorCode.NONE:
        raise _failed(result.error_code, result.error_message)
    return sorted(result.configs, key=lambda entry: entry.name)


def describe(client: QuotaClient, name: str = "", describe_all: bool = False) -> None:
    if name:
        print(f"{'All' if describe_all else 'Dynamic'} configs for broker {name} are:")
    else:
        print("Default configs for brokers in the cluster are:")
    for entry in entries(client, name):
        if name and not describe_all and entry.config_source != DYNAMIC_BROKER_CONFIG:
            continue
        synonyms = ", ".join(f"{SOURCES.get(s.source, s.source)}:{s.name}={_show(s.value)}" for s in entry.synonyms)
        sensitive = str(bool(entry.is_sensitive)).lower()
        print(f"  {entry.name}={_show(entry.value)} sensitive={sensitive} synonyms={{{synonyms}}}")


def alter(client: QuotaClient, to_add: dict[str, str], to_delete: list[str]) -> None:
    if to_delete:
        current = {entry.name for entry in entries(client)}
        missing = [key for key in to_delete if key not in current]
        if missing:
            raise ToolError(f"Invalid config(s): {','.join(missing)}")
    configs = [{"name": key, "config_operation": DELETE, "value": None} for key in to_delete]
    configs += [{"name": key, "config_operation": SET, "value": value} for key, value in to_add.items()]
    body = {"resources": [{"resource_type": BROKER, "resource_name": "", "configs": configs}], "validate_only": False}
    [result] = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body).responses
    if result.error_code != ErrorCode.NONE:
        raise _failed(result.error_code, result.error_message)
    print("Completed updating default config for brokers in the cluster.")
