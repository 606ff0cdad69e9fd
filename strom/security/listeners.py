"""What each listener requires of a connection, built once at startup from the broker config.

A listener's security protocol decides: TLS (SSL, SASL_SSL) with an SSL context from its
``ssl.*`` keys, SASL (SASL_PLAINTEXT, SASL_SSL) with the mechanisms it offers and, for PLAIN,
the users of its JAAS configuration. The inter-broker side (``ClientSecurity``) comes from the
inter-broker listener's keys and its ``sasl.mechanism.inter.broker.protocol`` login module.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from strom.security import tls
from strom.security.client import ClientSecurity
from strom.security.jaas import parse_jaas
from strom.security.oauthbearer import UnsecuredValidator, Validator, validator_for
from strom.security.principal import DEFAULT_MAPPER, PrincipalMapper

if TYPE_CHECKING:
    from strom.security.listener_config import ListenerConfig

log = logging.getLogger("strom.security")


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)
    principal_mapper: PrincipalMapper = DEFAULT_MAPPER
    max_reauth_ms: dict[str, int] = field(default_factory=dict)  # mechanism -> session lifetime (KIP-368), 0: none
    oauthbearer: Validator | None = None  # OAUTHBEARER's token validator (strom.security.oauthbearer)
    # the subject and alternative names of the certificate served (tls.keystore_identity): a
    # certificate put in service at run time must keep them, as in Kafka
    certificate: tuple[str, tuple[str, ...]] | None = None

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL")


def listener_security(config: ListenerConfig, name: str) -> ListenerSecurity:
    """ConfigError naming the key when a certificate or JAAS value is missing, unreadable or wrong."""
    protocol = config.protocol_of(name)
    setting = lambda key: config.listener_setting(name, key)  # noqa: E731
    context = tls.server_context(setting) if protocol in ("SSL", "SASL_SSL") else None
    mechanisms = config.sasl_mechanisms(name) if protocol.startswith("SASL") else ()
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        found = config.jaas_config(name, "PLAIN")
        assert found is not None  # config.check_security() refuses PLAIN without one
        text, key = found
        users = parse_jaas(key, text).users()
    rules, rules_key = setting("ssl.principal.mapping.rules")
    mapper = PrincipalMapper.parse(rules_key, rules) if rules != "DEFAULT" else DEFAULT_MAPPER
    reauth = {mechanism: config.max_reauth_ms(name, mechanism) for mechanism in mechanisms}
    oauthbearer = validator_for(config, name) if "OAUTHBEARER" in mechanisms else None
    if isinstance(oauthbearer, UnsecuredValidator):
        log.warning(
            "listener %s accepts unsigned OAUTHBEARER tokens (Kafka's unsecured validator): not for production", name
        )
    certificate = tls.keystore_identity(setting) if context is not None else None
    return ListenerSecurity(name, protocol, context, mechanisms, users, mapper, reauth, oauthbearer, certificate)


def inter_broker_security(config: ListenerConfig) -> ClientSecurity | None:
    """How this broker connects to the others' inter-broker listener; None for PLAINTEXT."""
    name = config.inter_broker_listener_name
    protocol = config.protocol_of(name)
    if protocol == "PLAINTEXT":
        return None
    context = tls.client_context(lambda key: config.listener_setting(name, key)) if protocol.endswith("SSL") else None
    if not protocol.startswith("SASL"):
        return ClientSecurity(context)
    mechanism = config.sasl_mechanism_inter_broker_protocol
    found = config.jaas_config(name, mechanism)
    assert found is not None  # config.check_security() refuses a SASL inter-broker listener without one
    text, key = found
    options = parse_jaas(key, text).options
    return ClientSecurity(context, mechanism, options["username"], options.get("password", ""))
