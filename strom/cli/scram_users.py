"""``strom configs --entity-type users``: SCRAM credentials, managed as kafka-configs.sh manages them.

    strom configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    strom configs --bootstrap-server H:P --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
    strom configs --bootstrap-server H:P --describe --entity-type users [--entity-name alice]

--describe prints Kafka's line, ``SCRAM credential configs for user-principal 'alice' are
SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096``, and nothing for a user without
credentials. The password never leaves this process: librdkafka salts it (iterations default to
4096) and AlterUserScramCredentials carries only the salt and the salted password. A user's quotas
(producer_byte_rate, ...) in the same command go through strom.cli.client_quotas.
"""

from __future__ import annotations

import re

from strom.cli.client_props import ToolError

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096


def _mechanism(name: str):
    from confluent_kafka.admin import ScramMechanism

    return ScramMechanism.SCRAM_SHA_256 if name == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512


def _mechanism_name(mechanism) -> str:
    return str(getattr(mechanism, "name", mechanism)).replace("_", "-")


def parse_credential(key: str, value: str) -> tuple[int, str]:
    """``iterations=8192,password=secret`` (the brackets already gone) -> (iterations, password)."""
    fields: dict[str, str] = {}
    for item in re.split(r",(?=\s*(?:iterations|password)\s*=)", value):
        name, sep, text = item.partition("=")
        if not sep or name.strip() not in ("iterations", "password"):
            raise ToolError(f"Invalid {key} value: expected [iterations=N,]password=SECRET")
        fields[name.strip()] = text
    if not fields.get("password"):
        raise ToolError(f"{key} needs a password: {key}=[password=SECRET]")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ToolError(f"Invalid iterations in {key}: {fields['iterations']}") from None
    return iterations, fields["password"]


def check_keys(to_add: dict[str, str], to_delete: list[str]) -> None:
    unknown = [key for key in [*to_add, *to_delete] if key not in MECHANISMS]
    if unknown:
        raise ToolError(
            f"Invalid config(s) for users: {','.join(unknown)} (strom manages {' and '.join(MECHANISMS)} "
            "credentials of users)"
        )


def alter(admin, user: str, to_add: dict[str, str], to_delete: list[str], timeout: float) -> None:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        UserScramCredentialAlteration,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    check_keys(to_add, to_delete)
    alterations: list[UserScramCredentialAlteration] = [
        UserScramCredentialDeletion(user, _mechanism(key)) for key in to_delete
    ]
    for key, value in to_add.items():
        iterations, password = parse_credential(key, value)
        alterations.append(
            UserScramCredentialUpsertion(user, ScramCredentialInfo(_mechanism(key), iterations), password.encode())
        )
    for future in admin.alter_user_scram_credentials(alterations, request_timeout=timeout).values():
        future.result(timeout=timeout)
    print(f"Completed updating config for user {user}.")


def describe(admin, user: str | None, timeout: float) -> None:
    from confluent_kafka import KafkaException

    if user is None:
        descriptions = admin.describe_user_scram_credentials(request_timeout=timeout).result(timeout=timeout)
    else:
        descriptions = {}
        for name, future in admin.describe_user_scram_credentials([user], request_timeout=timeout).items():
            try:
                descriptions[name] = future.result(timeout=timeout)
            except KafkaException as exc:  # RESOURCE_NOT_FOUND: a user without credentials, shown as nothing
                if exc.args[0].name() != "RESOURCE_NOT_FOUND":
                    raise
    for name in sorted(descriptions):
        infos = sorted(descriptions[name].scram_credential_infos, key=lambda info: _mechanism_name(info.mechanism))
        if infos:
            shown = ", ".join(f"{_mechanism_name(info.mechanism)}=iterations={info.iterations}" for info in infos)
            print(f"SCRAM credential configs for user-principal '{name}' are {shown}")
