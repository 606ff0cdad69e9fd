"""Principals: ``User:<name>`` from a SASL login or from a client certificate's distinguished name.

A certificate's subject becomes its RFC 2253 string as Java's ``X500Principal.getName()`` prints
it (last RDN first: ``CN=alice,OU=eng,O=acme,C=US``), then ``ssl.principal.mapping.rules`` may
rewrite it, as Kafka's SslPrincipalMapper does::

    RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from strom.security.scram import AuthenticationFailed
from strom.storage.log_config import ConfigError

ANONYMOUS = "User:ANONYMOUS"
USER_TYPE = "User"

# Keywords Java prints by name in RFC 2253 form; any other attribute appears as its OID.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
# OID and ASN.1 string tag of the other attributes Python names (IA5String for e-mail, else UTF8String)
_OIDS = {
    "emailAddress": ("1.2.840.113549.1.9.1", 0x16),
    "serialNumber": ("2.5.4.5", 0x13),
    "surname": ("2.5.4.4", 0x0C),
    "givenName": ("2.5.4.42", 0x0C),
    "title": ("2.5.4.12", 0x0C),
    "initials": ("2.5.4.43", 0x0C),
    "generationQualifier": ("2.5.4.44", 0x0C),
    "dnQualifier": ("2.5.4.46", 0x13),
    "pseudonym": ("2.5.4.65", 0x0C),
    "businessCategory": ("2.5.4.15", 0x0C),
    "postalCode": ("2.5.4.17", 0x0C),
}


def user(name: str) -> str:
    return f"{USER_TYPE}:{name}"


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def _der_hex(value: str, tag: int) -> str:
    data = value.encode()
    length = (
        bytes([len(data)])
        if len(data) < 128
        else bytes([0x81, len(data)])
        if len(data) < 256
        else bytes([0x82]) + len(data).to_bytes(2, "big")
    )
    return "#" + (bytes([tag]) + length + data).hex()


def distinguished_name(subject: tuple) -> str:
    """``SSLObject.getpeercert()["subject"]`` in RFC 2253 form, as Java prints it."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for name, value in rdn:
            if name in _KEYWORDS:
                parts.append(f"{_KEYWORDS[name]}={_escape(value)}")
            else:
                oid, tag = _OIDS.get(name, (name, 0x0C))
                parts.append(f"{oid}={_der_hex(value, tag)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


# Kafka's SslPrincipalMapper.RULE_SPLITTER
_RULE_SPLITTER = re.compile(r"\s*(DEFAULT|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?))\s*([,\n]\s*|$)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        result = self.pattern.sub(self.replacement, dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: the first rule that matches names the user; none matching fails the login."""

    def __init__(self, rules: tuple[_Rule, ...], text: str):
        self.rules = rules
        self.text = text

    @classmethod
    def parse(cls, key: str, text: str) -> PrincipalMapper:
        rules = []
        position, text = 0, text.strip()
        while position < len(text):
            match = _RULE_SPLITTER.match(text, position)
            if match is None or match.end() == position:
                raise ConfigError(key, f"invalid rule at {text[position:]!r}")
            position = match.end()
            if match.group(7):
                raise ConfigError(
                    key, f"invalid rule: {match.group(7)!r} (expected DEFAULT or RULE:pattern/replacement/[LU])"
                )
            if match.group(1) == "DEFAULT":
                rules.append(_Rule(None))
                continue
            try:
                pattern = re.compile(match.group(2).replace("\\/", "/"))
            except re.error as exc:
                raise ConfigError(key, f"invalid pattern {match.group(2)!r}: {exc}") from None
            replacement = re.sub(r"\$(\d)", r"\\g<\1>", match.group(4).replace("\\/", "/"))
            rules.append(_Rule(pattern, replacement, match.group(6)))
        if not rules:
            raise ConfigError(key, "must list at least one rule")
        return cls(tuple(rules), text)

    def principal(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return user(name)
        raise AuthenticationFailed(f"No rules apply to {dn}, rules {self.text}")


DEFAULT_MAPPER = PrincipalMapper((_Rule(None),), "DEFAULT")
