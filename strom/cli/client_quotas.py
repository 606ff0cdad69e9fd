"""``strom configs --entity-type users|clients``: client quotas, managed as kafka-configs.sh manages them.

    strom configs --bootstrap-server H:P --alter --entity-type clients --entity-name app \\
        --add-config 'producer_byte_rate=1048576,consumer_byte_rate=2097152'
    strom configs --bootstrap-server H:P --alter --entity-type users --entity-default --add-config request_percentage=200
    strom configs --bootstrap-server H:P --alter --user alice --client app --delete-config producer_byte_rate
    strom configs --bootstrap-server H:P --describe --entity-type clients [--entity-name app]

--describe prints Kafka's lines, ``Quota configs for client-id 'app' are producer_byte_rate=1048576.0``
(``user-principal 'alice', client-id 'app'``, ``the default user-principal``, ...). librdkafka has no
client-quota API, so DescribeClientQuotas and AlterClientQuotas go over strom's own client
connection, secured from the same --command-config properties (security.protocol, sasl.mechanism,
sasl.username/password or sasl.jaas.config, ssl.ca.location or a PEM ssl.truststore.location).
"""

from __future__ import annotations

import asyncio
from typing import Any

from strom.cli.client_props import ToolError, client_security
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "connection_creation_rate")
DEFAULT = None  # the <default> entity: a null name on the wire
VERSION = 1
EXACT, DEFAULT_MATCH, SPECIFIED = 0, 1, 2
USER, CLIENT_ID, IP = "user", "client-id", "ip"

# (entity type, name or DEFAULT); an absent type is not part of the entity
Entity = list[tuple[str, str | None]]


class QuotaClient:
    """One connection to the first bootstrap server (any broker serves both APIs)."""

    def __init__(self, bootstrap: str, props: dict[str, str], timeout_s: float):
        from strom.replication.client import BrokerClient

        host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
        if not host or not port.isdigit():
            raise ToolError(f"Invalid bootstrap server {bootstrap!r}: expected HOST:PORT")
        self.timeout_s = timeout_s
        self.loop = asyncio.new_event_loop()
        self.client = BrokerClient(
            host.strip("[]"),
            int(port),
            props.get("client.id", "strom-configs"),
            timeout_s,
            security=client_security(props),
        )

    def request(self, api_key: int, values: dict[str, Any]) -> Any:
        from strom.replication.client import BrokerConnectionError

        try:
            return self.loop.run_until_complete(self.client.request(api_key, VERSION, values, self.timeout_s))
        except BrokerConnectionError as exc:
            raise ToolError(str(exc)) from None

    def close(self) -> None:
        self.client.close()
        self.loop.close()


def describe(client: QuotaClient, user: str | None | bool, client_id: str | None | bool) -> None:
    """``user``/``client_id``: a name, DEFAULT (None), False (not part of the entity) or True (every one)."""
    components = []
    for entity_type, name in ((USER, user), (CLIENT_ID, client_id)):
        if name is True:
            components.append({"entity_type": entity_type, "match_type": SPECIFIED, "match": None})
        elif name is DEFAULT:
            components.append({"entity_type": entity_type, "match_type": DEFAULT_MATCH, "match": None})
        elif name is not False:
            components.append({"entity_type": entity_type, "match_type": EXACT, "match": name})
    _print_entries(client, components)


def describe_ips(client: QuotaClient, ip: str | None | bool) -> None:
    """``ip``: an address, DEFAULT (None) or True (every named one)."""
    if ip is True:
        component = {"entity_type": IP, "match_type": SPECIFIED, "match": None}
    elif ip is DEFAULT:
        component = {"entity_type": IP, "match_type": DEFAULT_MATCH, "match": None}
    else:
        component = {"entity_type": IP, "match_type": EXACT, "match": ip}
    _print_entries(client, [component])


def _print_entries(client: QuotaClient, components: list[dict[str, Any]]) -> None:
    response = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": components, "strict": True})
    if response.error_code != ErrorCode.NONE:
        raise ToolError(f"Error while executing config command: {response.error_message}")
    for entry in sorted(response.entries or (), key=lambda e: [(p.entity_type, p.entity_name or "") for p in e.entity]):
        shown = ", ".join(f"{v.key}={float(v.value)}" for v in entry.values)
        print(
            f"Quota configs for {_describe_entity([(p.entity_type, p.entity_name) for p in entry.entity])} are {shown}"
        )


def _describe_entity(entity: Entity) -> str:
    names = {USER: "user-principal", CLIENT_ID: "client-id", IP: "ip"}
    return ", ".join(f"the default {names[t]}" if n is DEFAULT else f"{names[t]} '{n}'" for t, n in entity)


def alter(client: QuotaClient, entity: Entity, to_add: dict[str, str], to_delete: list[str]) -> None:
    unknown = [key for key in [*to_add, *to_delete] if key not in QUOTA_KEYS]
    if unknown:
        raise ToolError(f"Invalid config(s): {','.join(unknown)}")
    ops: list[dict[str, Any]] = [{"key": key, "value": 0.0, "remove": True} for key in to_delete]
    for key, text in to_add.items():
        try:
            ops.append({"key": key, "value": float(text), "remove": False})
        except ValueError:
            raise ToolError(f"Invalid value {text!r} for {key}: expected a number") from None
    response = client.request(
        ApiKey.ALTER_CLIENT_QUOTAS,
        {
            "validate_only": False,
            "entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "ops": ops}],
        },
    )
    for entry in response.entries:
        if entry.error_code != ErrorCode.NONE:
            raise ToolError(
                f"Error while executing config command: {entry.error_message or ErrorCode.from_wire(entry.error_code).name}"
            )
    print(f"Completed updating {_altered(entity)}.")


def _altered(entity: Entity) -> str:
    """Kafka's wording: ``config for user alice``, ``default config for clients in the cluster``."""
    words = {USER: ("user", "users"), CLIENT_ID: ("client", "clients"), IP: ("ip", "ips")}
    if len(entity) == 1:
        entity_type, name = entity[0]
        if name is DEFAULT:
            return f"default config for {words[entity_type][1]} in the cluster"
        return f"config for {words[entity_type][0]} {name}"
    return "config for " + ", ".join(
        f"{'default ' if n is DEFAULT else ''}{words[t][0]}{'' if n is DEFAULT else ' ' + n}" for t, n in entity
    )
