"""``strom configs``: describe and alter topic and broker configs, like Kafka's kafka-configs.sh.

    strom configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name orders --describe
    strom configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name orders --describe --all
    strom configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name orders \\
        --alter --add-config retention.ms=86400000,cleanup.policy=[compact,delete] --delete-config segment.ms
    strom configs --bootstrap-server 127.0.0.1:9092 --entity-type brokers --entity-name 0 --describe --all

--describe prints Kafka's layout: ``Dynamic configs for topic orders are:`` (``All configs`` with
--all) and one ``  name=value sensitive=false synonyms={SOURCE:name=value, ...}`` line per entry,
sorted by name. Without --all only the entity's dynamic entries are shown (DYNAMIC_TOPIC_CONFIG for a
topic, DYNAMIC_BROKER_CONFIG for a broker). The cluster-default broker entity (--entity-default,
--broker-defaults: KIP-226's cluster-wide dynamic configs) goes over strom's own client, since
librdkafka cannot address a config resource with an empty name (strom.cli.broker_defaults).
--alter uses IncrementalAlterConfigs (SET for --add-config, DELETE for --delete-config); a value
holding commas is grouped in square brackets. Uses the DescribeConfigs and IncrementalAlterConfigs APIs.
When no broker answers within --timeout (default 10 s) it fails with one line naming the servers.
--entity-type users manages SCRAM credentials (see strom.cli.scram_users) and, with --entity-type clients
and the --user/--client/--user-defaults/--client-defaults shortcuts, client quotas (strom.cli.client_quotas).
--entity-type ips (--entity-name IP or --entity-default) sets an address's connection_creation_rate.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from strom.cli.client_props import (
    ToolError,
    add_timeout_argument,
    client_config,
    command_properties,
    ensure_reachable,
    error_text,
    exits_quietly_on_broken_pipe,
    load_properties,
)

# users: SCRAM credentials and quotas; clients: quotas; ips: connection creation rates (KIP-612)
ENTITY_TYPES = ("topics", "brokers", "users", "clients", "ips")
DEFAULT_ENTITY = ""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list configs for the given entity")
    actions.add_argument("--alter", action="store_true", help="alter the configuration of the entity")
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the broker(s) to connect to"
    )
    parser.add_argument("--command-config", metavar="FILE", help="admin client properties file")
    parser.add_argument("--entity-type", choices=ENTITY_TYPES, help="topics, brokers, users, clients or ips")
    parser.add_argument("--entity-name", help="topic name or broker id (all of them when left out with --describe)")
    parser.add_argument(
        "--entity-default",
        action="store_true",
        help="the default entity: the cluster-wide broker default, or the default user, client or ip",
    )
    parser.add_argument("--topic", help="shortcut for --entity-type topics --entity-name TOPIC")
    parser.add_argument("--broker", help="shortcut for --entity-type brokers --entity-name BROKER")
    parser.add_argument(
        "--broker-defaults", action="store_true", help="shortcut for --entity-type brokers --entity-default"
    )
    parser.add_argument("--user", help="shortcut for --entity-type users --entity-name USER (combines with --client)")
    parser.add_argument(
        "--client", help="shortcut for --entity-type clients --entity-name CLIENT (combines with --user)"
    )
    parser.add_argument("--user-defaults", action="store_true", help="the default user entity (quotas)")
    parser.add_argument("--client-defaults", action="store_true", help="the default client-id entity (quotas)")
    parser.add_argument("--all", action="store_true", help="--describe: every config, not only dynamic ones")
    parser.add_argument("--add-config", metavar="K1=V1,K2=[V2,V3]", help="configs to set")
    parser.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
    parser.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K1,K2",
        help="configs to remove (comma-separated, repeatable)",
    )
    add_timeout_argument(parser)


@exits_quietly_on_broken_pipe
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        if args.entity_type == "ips":
            return ip_quotas(args)
        target = quota_entity(args)
        if target is not None:
            return users_and_clients(args, *target)
        entity_type, entity_name = resolve_entity(args)
        if entity_name == DEFAULT_ENTITY:
            return broker_defaults(args)
        overrides = load_properties(args.command_config) if args.command_config else {}
        admin = AdminClient(client_config(args.bootstrap_server, overrides=overrides))
        timeout = args.timeout / 1000
        ensure_reachable(admin, args.bootstrap_server, timeout)
        if args.describe and entity_type == "brokers":
            names = (
                [entity_name]
                if entity_name is not None
                else [str(b) for b in sorted(admin.list_topics(timeout=timeout).brokers)]
            )
            describe_brokers(admin, names, args, timeout)
        elif args.describe:
            describe(admin, entity_type, entity_name, args.all, timeout)
        else:
            assert entity_name is not None  # resolve_entity requires one with --alter
            alter(admin, entity_type, entity_name, args, timeout)
        return 0
    except ToolError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except (KafkaException, ValueError) as exc:
        print(f"Error while executing config command: {error_text(exc)}", file=sys.stderr)
        return 1


def resolve_entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, entity name); the name is None for 'all entities'."""
    choices = []
    if args.entity_type:
        name = DEFAULT_ENTITY if args.entity_default else args.entity_name
        choices.append((args.entity_type, name))
    elif args.entity_name is not None or args.entity_default:
        raise ToolError("--entity-type must be specified with --entity-name or --entity-default")
    if args.topic is not None:
        choices.append(("topics", args.topic))
    if args.broker is not None:
        choices.append(("brokers", args.broker))
    if args.broker_defaults:
        choices.append(("brokers", DEFAULT_ENTITY))
    if len(choices) != 1:
        raise ToolError(
            "Exactly one entity must be given: --entity-type with --entity-name/--entity-default, "
            "or one of --topic, --broker, --broker-defaults"
        )
    entity_type, name = choices[0]
    if args.entity_default and entity_type != "brokers":
        raise ToolError("--entity-default is only valid with --entity-type brokers")
    if args.entity_default and args.entity_name is not None:
        raise ToolError("--entity-name and --entity-default cannot be used together")
    if entity_type == "brokers" and name:
        try:
            int(name)
        except ValueError:
            raise ToolError(f"The entity name for brokers must be a valid integer broker id, found: {name}") from None
    if args.alter:
        if name is None:
            raise ToolError("An entity name must be specified with --alter")
        if not (args.add_config or args.add_config_file or args.delete_config):
            raise ToolError(
                "At least one of --add-config, --add-config-file or --delete-config must be specified with --alter"
            )
    elif args.add_config or args.add_config_file or args.delete_config:
        raise ToolError("--add-config, --add-config-file and --delete-config are only valid with --alter")
    return entity_type, name


# ---------------------------------------------------------------- describe


def resource(entity_type: str, name: str):
    from confluent_kafka.admin import ConfigResource, ResourceType

    return ConfigResource(ResourceType.TOPIC if entity_type == "topics" else ResourceType.BROKER, name)


def dynamic_source(entity_type: str):
    from confluent_kafka.admin import ConfigSource

    return ConfigSource.DYNAMIC_TOPIC_CONFIG if entity_type == "topics" else ConfigSource.DYNAMIC_BROKER_CONFIG


def fetch_entries(admin, entity_type: str, name: str, describe_all: bool, timeout: float) -> list:
    futures = admin.describe_configs([resource(entity_type, name)], request_timeout=timeout)
    entries = next(iter(futures.values())).result(timeout=timeout)
    wanted = dynamic_source(entity_type).value
    return sorted(
        (entry for entry in entries.values() if describe_all or entry.source == wanted), key=lambda entry: entry.name
    )


def source_name(source) -> str:
    from confluent_kafka.admin import ConfigSource

    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def show(value) -> str:
    return "null" if value is None else str(value)


def describe(admin, entity_type: str, name: str | None, describe_all: bool, timeout: float) -> None:
    if name is not None:
        names = [name]
    elif entity_type == "topics":
        names = sorted(admin.list_topics(timeout=timeout).topics)
    else:
        names = [str(b) for b in sorted(admin.list_topics(timeout=timeout).brokers)]
    for entity in names:
        entries = fetch_entries(admin, entity_type, entity, describe_all, timeout)
        print(f"{'All' if describe_all else 'Dynamic'} configs for {entity_type[:-1]} {entity} are:")
        for entry in entries:
            synonyms = ", ".join(
                f"{source_name(s.source)}:{s.name}={show(s.value)}" for s in (entry.synonyms or {}).values()
            )
            print(
                f"  {entry.name}={show(entry.value)} sensitive={str(bool(entry.is_sensitive)).lower()} "
                f"synonyms={{{synonyms}}}"
            )


# ---------------------------------------------------------------- alter


_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(text: str | None) -> dict[str, str]:
    """Kafka's --add-config: ``k1=v1,k2=[v2,v3]``; commas inside brackets stay in the value."""
    configs: dict[str, str] = {}
    if not text:
        return configs
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pieces = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pieces) != 2:
            raise ToolError(
                'Invalid entity config: all configs to be added must be in the format "key=val" or '
                '"key=[val1,val2]" to group values which contain commas.'
            )
        key = pieces[0].strip()
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise ToolError(f"Invalid character found for config key: {key}")
        configs[key] = re.sub(r"\[?\]?", "", pieces[1]).strip()
    return configs


def alter(admin, entity_type: str, name: str, args: argparse.Namespace, timeout: float) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    to_add = load_properties(args.add_config_file) if args.add_config_file else {}
    to_add.update(parse_add_config(args.add_config))
    to_delete = [key.strip() for item in args.delete_config for key in item.split(",") if key.strip()]
    if to_delete:
        current = {entry.name for entry in fetch_entries(admin, entity_type, name, False, timeout)}
        missing = [key for key in to_delete if key not in current]
        if missing:
            raise ToolError(f"Invalid config(s): {','.join(missing)}")
    target = resource(entity_type, name)
    target.incremental_configs = [
        ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in to_delete
    ] + [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in to_add.items()]
    futures = admin.incremental_alter_configs([target], request_timeout=timeout)
    for future in futures.values():
        future.result(timeout=timeout)
    print(f"Completed updating config for {entity_type[:-1]} {name}.")


def quota_entity(args: argparse.Namespace) -> tuple[Any, Any] | None:
    """(user, client) for users/clients entities, each a name, None (the default), False (not part of
    the entity) or True (every named one, --describe without a name); None for topics and brokers."""
    user: Any = False
    client: Any = False
    if args.entity_type in ("users", "clients"):
        if args.entity_default and args.entity_name is not None:
            raise ToolError("--entity-name and --entity-default cannot be used together")
        value = None if args.entity_default else (True if args.entity_name is None else args.entity_name)
        user, client = (value, False) if args.entity_type == "users" else (False, value)
    elif args.entity_type is not None and (args.user or args.client or args.user_defaults or args.client_defaults):
        raise ToolError(f"--user and --client cannot be combined with --entity-type {args.entity_type}")
    if args.user is not None or args.user_defaults:
        user = None if args.user_defaults else args.user
    if args.client is not None or args.client_defaults:
        client = None if args.client_defaults else args.client
    if user is False and client is False:
        return None
    if args.alter:
        if True in (user, client):
            raise ToolError("An entity name must be specified with --alter")
        if not (args.add_config or args.add_config_file or args.delete_config):
            raise ToolError(
                "At least one of --add-config, --add-config-file or --delete-config must be specified with --alter"
            )
    elif args.add_config or args.add_config_file or args.delete_config:
        raise ToolError("--add-config, --add-config-file and --delete-config are only valid with --alter")
    return user, client


def broker_defaults(args: argparse.Namespace) -> int:
    """The cluster-wide dynamic broker configs (strom.cli.broker_configs: librdkafka cannot name them)."""
    from strom.cli import broker_configs, client_quotas

    to_add = load_properties(args.add_config_file) if args.add_config_file else {}
    to_add.update(parse_add_config(args.add_config))
    to_delete = [key.strip() for item in args.delete_config for key in item.split(",") if key.strip()]
    client = client_quotas.QuotaClient(
        args.bootstrap_server, command_properties(args.command_config), args.timeout / 1000
    )
    try:
        if args.describe:
            broker_configs.describe(client)
        else:
            broker_configs.alter(client, to_add, to_delete)
    finally:
        client.close()
    return 0


def describe_brokers(admin, names: list[str], args: argparse.Namespace, timeout: float) -> None:
    """Each broker described by itself, over strom's client (every synonym kept: see strom.cli.broker_configs)."""
    from strom.cli import broker_configs, client_quotas

    brokers = admin.list_topics(timeout=timeout).brokers
    for name in names:
        found = brokers.get(int(name))
        if found is None:
            raise ToolError(f"Broker {name} is not in the cluster (brokers: {', '.join(map(str, sorted(brokers)))})")
        address = f"{found.host}:{found.port}"
        client = client_quotas.QuotaClient(address, command_properties(args.command_config), timeout)
        try:
            broker_configs.describe(client, name, args.all)
        finally:
            client.close()


def ip_quotas(args: argparse.Namespace) -> int:
    """An address's (or the default's) connection_creation_rate, as kafka-configs.sh --entity-type ips."""
    from strom.cli import client_quotas

    if args.entity_default and args.entity_name is not None:
        raise ToolError("--entity-name and --entity-default cannot be used together")
    ip: Any = None if args.entity_default else (True if args.entity_name is None else args.entity_name)
    to_add = load_properties(args.add_config_file) if args.add_config_file else {}
    to_add.update(parse_add_config(args.add_config))
    to_delete = [key.strip() for item in args.delete_config for key in item.split(",") if key.strip()]
    if args.alter:
        if ip is True:
            raise ToolError("An entity name must be specified with --alter")
        if not (to_add or to_delete):
            raise ToolError("At least one of --add-config, --add-config-file or --delete-config must be specified")
    elif to_add or to_delete:
        raise ToolError("--add-config, --add-config-file and --delete-config are only valid with --alter")
    quotas = client_quotas.QuotaClient(
        args.bootstrap_server, command_properties(args.command_config), args.timeout / 1000
    )
    try:
        if args.describe:
            client_quotas.describe_ips(quotas, ip)
        else:
            client_quotas.alter(quotas, [(client_quotas.IP, ip)], to_add, to_delete)
    finally:
        quotas.close()
    return 0


def users_and_clients(args: argparse.Namespace, user: Any, client: Any) -> int:
    """Quotas of users and client-ids; SCRAM credentials too when the entity is one user (or all users)."""
    from confluent_kafka.admin import AdminClient

    from strom.cli import client_quotas, scram_users

    props = command_properties(args.command_config)
    timeout = args.timeout / 1000
    to_add = load_properties(args.add_config_file) if args.add_config_file else {}
    to_add.update(parse_add_config(args.add_config))
    to_delete = [key.strip() for item in args.delete_config for key in item.split(",") if key.strip()]
    scram_add = {k: v for k, v in to_add.items() if k in scram_users.MECHANISMS}
    scram_delete = [k for k in to_delete if k in scram_users.MECHANISMS]
    users_only = client is False and user is not None
    if (scram_add or scram_delete) and not users_only:
        raise ToolError("SCRAM credentials belong to a named user alone (--entity-type users --entity-name USER)")
    if users_only and (args.describe or scram_add or scram_delete):
        admin = AdminClient(client_config(args.bootstrap_server, overrides=props))
        ensure_reachable(admin, args.bootstrap_server, timeout)
        if args.describe:
            scram_users.describe(admin, None if user is True else user, timeout)
        else:
            scram_users.alter(admin, user, scram_add, scram_delete, timeout)
            if len(scram_add) + len(scram_delete) == len(to_add) + len(to_delete):
                return 0
    quotas = client_quotas.QuotaClient(args.bootstrap_server, props, timeout)
    try:
        entity = [(t, n) for t, n in ((client_quotas.USER, user), (client_quotas.CLIENT_ID, client)) if n is not False]
        if args.describe:
            client_quotas.describe(quotas, user, client)
        else:
            client_quotas.alter(
                quotas,
                entity,
                {k: v for k, v in to_add.items() if k not in scram_add},
                [k for k in to_delete if k not in scram_delete],
            )
    finally:
        quotas.close()
    return 0
