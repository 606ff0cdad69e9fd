"""``strom delegation-tokens``: create, renew, expire and describe delegation tokens, like kafka-delegation-tokens.sh.

    strom delegation-tokens --bootstrap-server H:P --command-config admin.properties --create \\
        --max-life-time-period -1 [--renewer-principal User:bob] [--owner-principal User:alice]
    strom delegation-tokens --bootstrap-server H:P --command-config F --renew --hmac HMAC --renew-time-period -1
    strom delegation-tokens --bootstrap-server H:P --command-config F --expire --hmac HMAC --expiry-time-period -1
    strom delegation-tokens --bootstrap-server H:P --command-config F --describe [--owner-principal User:alice]

Neither librdkafka nor kafka-python has the delegation-token admin calls, so this tool sends the
four requests over strom's own client connection (TLS and SASL from the --command-config file).
Periods are milliseconds; -1 means the broker's default. The output is kafka-delegation-tokens.sh's:
a client then logs in with the TOKENID as SCRAM user name, the HMAC as password and
``tokenauth=true`` (Java: ``tokenauth="true"`` in the ScramLoginModule's JAAS options).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime
import sys
from typing import Any

from strom.cli.client_props import (
    ToolError,
    add_command_config_argument,
    add_timeout_argument,
    bootstrap_broker_client,
    command_properties,
    exits_quietly_on_broken_pipe,
)
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode

ERROR_PREFIX = "Error while executing delegation token command : "
VERSIONS = {
    ApiKey.CREATE_DELEGATION_TOKEN: 3,
    ApiKey.RENEW_DELEGATION_TOKEN: 2,
    ApiKey.EXPIRE_DELEGATION_TOKEN: 2,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: 3,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--create", action="store_true", help="create a token")
    actions.add_argument("--renew", action="store_true", help="renew a token (by its --hmac)")
    actions.add_argument("--expire", action="store_true", help="expire a token (by its --hmac)")
    actions.add_argument("--describe", action="store_true", help="describe tokens")
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the broker to connect to"
    )
    add_command_config_argument(parser, "admin client properties file (REQUIRED by Kafka's tool)")
    parser.add_argument("--max-life-time-period", type=int, metavar="MS", help="--create: max life (-1: broker's)")
    parser.add_argument(
        "--renewer-principal", action="append", default=[], metavar="User:name", help="--create: a renewer"
    )
    parser.add_argument(
        "--owner-principal",
        action="append",
        default=[],
        metavar="User:name",
        help="--create: the token's owner (KIP-373); --describe: only these owners' tokens",
    )
    parser.add_argument("--hmac", help="--renew/--expire: the token's HMAC (base64)")
    parser.add_argument("--renew-time-period", type=int, metavar="MS", help="--renew: period (-1: broker's)")
    parser.add_argument("--expiry-time-period", type=int, metavar="MS", help="--expire: period (-1: at once)")
    add_timeout_argument(parser)


def _principal(text: str) -> tuple[str, str]:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise ToolError(f"Invalid principal {text!r}: expected PrincipalType:name, such as User:alice")
    return kind, name


def _date(ms: int) -> str:
    """Kafka's SimpleDateFormat("yyyy-MM-dd'T'HH:mm") in the local time zone."""
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%dT%H:%M")


def _ms(value: Any) -> int:
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return int(value)


def _check(response: Any) -> None:
    code = int(response.error_code)
    if code != ErrorCode.NONE:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error {code}"
        raise ToolError(f"{name} ({code}){': ' + _EXPLAINED[code] if code in _EXPLAINED else ''}")


_EXPLAINED: dict[int, str] = {
    ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED: "Delegation Token feature is not enabled.",
    ErrorCode.DELEGATION_TOKEN_NOT_FOUND: "Delegation Token is not found on server.",
    ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH: "Specified Principal is not valid Owner/Renewer.",
    ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: (
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token "
        "authenticated channels."
    ),
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "Delegation Token authorization failed.",
    ErrorCode.DELEGATION_TOKEN_EXPIRED: "Delegation Token is expired.",
}


def _print_tokens(tokens: list[dict[str, Any]]) -> None:
    row = "%-15s %-30s %-15s %-15s %-25s %-15s %-15s %-15s"
    print(
        "\n" + row % ("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"), end=""
    )
    for token in tokens:
        print(
            "\n"
            + row
            % (
                token["token_id"],
                token["hmac"],
                token["owner"],
                token["requester"],
                "[" + ", ".join(token["renewers"]) + "]",
                _date(token["issue"]),
                _date(token["expiry"]),
                _date(token["max"]),
            )
        )


async def _run(args: argparse.Namespace, props: dict[str, str]) -> None:
    from strom.replication.client import BrokerConnectionError

    timeout_s = args.timeout / 1000
    client = bootstrap_broker_client(args.bootstrap_server, timeout_s, props, "strom-delegation-tokens")

    async def request(api_key: ApiKey, values: dict[str, Any]) -> Any:
        try:
            return await client.request(api_key, VERSIONS[api_key], values, timeout_s)
        except BrokerConnectionError as exc:
            raise ToolError(str(exc)) from None

    try:
        if args.create:
            await _create(args, request)
        elif args.renew or args.expire:
            await _renew_or_expire(args, request)
        else:
            await _describe(args, request)
    finally:
        client.close()


async def _create(args: argparse.Namespace, request) -> None:
    if args.max_life_time_period is None:
        raise ToolError("Missing required argument: --max-life-time-period")
    renewers = [_principal(p) for p in args.renewer_principal]
    if len(args.owner_principal) > 1:
        raise ToolError("--create takes one --owner-principal")
    owner = _principal(args.owner_principal[0]) if args.owner_principal else (None, None)
    print(
        f"Calling create token operation with renewers :[{', '.join(args.renewer_principal)}] , "
        f"max-life-time-period :{args.max_life_time_period}"
    )
    response = await request(
        ApiKey.CREATE_DELEGATION_TOKEN,
        {
            "owner_principal_type": owner[0],
            "owner_principal_name": owner[1],
            "renewers": [{"principal_type": kind, "principal_name": name} for kind, name in renewers],
            "max_lifetime": args.max_life_time_period,
        },
    )
    _check(response)
    print(f"Created delegation token with tokenId : {response.token_id}")
    _print_tokens(
        [
            {
                "token_id": response.token_id,
                "hmac": base64.b64encode(response.hmac).decode(),
                "owner": f"{response.principal_type}:{response.principal_name}",
                "requester": f"{response.token_requester_principal_type}:{response.token_requester_principal_name}",
                "renewers": args.renewer_principal,
                "issue": _ms(response.issue_timestamp),
                "expiry": _ms(response.expiry_timestamp),
                "max": _ms(response.max_timestamp),
            }
        ]
    )


async def _renew_or_expire(args: argparse.Namespace, request) -> None:
    if not args.hmac:
        raise ToolError("Missing required argument: --hmac")
    try:
        digest = base64.b64decode(args.hmac, validate=True)
    except ValueError:
        raise ToolError(f"--hmac {args.hmac!r} is not base64") from None
    if args.renew:
        if args.renew_time_period is None:
            raise ToolError("Missing required argument: --renew-time-period")
        print(f"Calling renew token operation with hmac :{args.hmac} , renew-time-period :{args.renew_time_period}")
        response = await request(
            ApiKey.RENEW_DELEGATION_TOKEN, {"hmac": digest, "renew_period": args.renew_time_period}
        )
        _check(response)
        print(f"Completed renew operation. New expiry date : {_date(_ms(response.expiry_timestamp))}")
    else:
        if args.expiry_time_period is None:
            raise ToolError("Missing required argument: --expiry-time-period")
        print(f"Calling expire token operation with hmac :{args.hmac} , expire-time-period :{args.expiry_time_period}")
        response = await request(
            ApiKey.EXPIRE_DELEGATION_TOKEN, {"hmac": digest, "expiry_time_period": args.expiry_time_period}
        )
        _check(response)
        print(f"Completed expire operation. New expiry date : {_date(_ms(response.expiry_timestamp))}")


async def _describe(args: argparse.Namespace, request) -> None:
    owners = [_principal(p) for p in args.owner_principal]
    print(f"Calling describe token operation for owners: [{', '.join(args.owner_principal)}]")
    response = await request(
        ApiKey.DESCRIBE_DELEGATION_TOKEN,
        {"owners": [{"principal_type": kind, "principal_name": name} for kind, name in owners] or None},
    )
    _check(response)
    print(f"Total number of tokens : {len(response.tokens)}")
    _print_tokens(
        [
            {
                "token_id": token.token_id,
                "hmac": base64.b64encode(token.hmac).decode(),
                "owner": f"{token.principal_type}:{token.principal_name}",
                "requester": f"{token.token_requester_principal_type}:{token.token_requester_principal_name}",
                "renewers": [f"{r.principal_type}:{r.principal_name}" for r in token.renewers],
                "issue": token.issue_timestamp,
                "expiry": token.expiry_timestamp,
                "max": token.max_timestamp,
            }
            for token in response.tokens
        ]
    )


@exits_quietly_on_broken_pipe
def run(args: argparse.Namespace) -> int:
    try:
        asyncio.run(_run(args, command_properties(args.command_config)))
        return 0
    except (ToolError, ValueError) as exc:
        print(ERROR_PREFIX + str(exc), file=sys.stderr)
        return 1
