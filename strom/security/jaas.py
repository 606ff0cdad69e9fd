"""Kafka's JAAS configuration values (``sasl.jaas.config``), read the way Kafka's JaasConfig reads them.

    org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" user_alice="s";

One login module per value: its class name, a control flag, then ``key=value`` options (quoted or
bare words), ended by a semicolon. A broker reads the PLAIN module's ``user_<name>`` options as the
users it accepts, and ``username``/``password`` of the mechanism it uses towards other brokers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from strom.storage.log_config import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[A-Za-z0-9_$.\-]+)|(?P<punct>[=;]))', re.S)
_ESCAPE = re.compile(r"\\(.)", re.S)


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>="<password>"`` options: the users a PLAIN listener accepts."""
        return {key[5:]: value for key, value in self.options.items() if key.startswith("user_") and len(key) > 5}


def _tokens(key: str, text: str) -> list[tuple[str, str]]:
    tokens = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ConfigError(key, f"unexpected character {text[position:].lstrip()[:1]!r} in the JAAS configuration")
        position = match.end()
        if match["quoted"] is not None:
            tokens.append(("value", _ESCAPE.sub(r"\1", match["quoted"][1:-1])))
        elif match["word"] is not None:
            tokens.append(("word", match["word"]))
        else:
            tokens.append((match["punct"], match["punct"]))
    return tokens


def parse_jaas(key: str, text: str) -> LoginModule:
    """One login module, or ConfigError naming ``key`` (Kafka also allows exactly one per value)."""
    tokens = _tokens(key, text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ConfigError(key, "expected '<LoginModule class> <control flag> key=\"value\" ... ;'")
    class_name, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in CONTROL_FLAGS:
        raise ConfigError(key, f"login module control flag {tokens[1][1]!r} is not one of {', '.join(CONTROL_FLAGS)}")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        if (
            i + 2 >= len(tokens)
            or tokens[i][0] != "word"
            or tokens[i + 1][0] != "="
            or tokens[i + 2][0] not in ("word", "value")
        ):
            raise ConfigError(key, "login module options must be key=value pairs")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise ConfigError(key, "the JAAS configuration must end with ';'")
    if i != len(tokens) - 1:
        raise ConfigError(key, "must contain exactly one login module")
    return LoginModule(class_name, flag, options)
