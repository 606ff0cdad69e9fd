"""The broker's security keys: TLS (``ssl.*``), SASL (``sasl.*``, ``connections.max.reauth.ms``),
OAUTHBEARER's validator (``sasl.oauthbearer.*``), authorization (``authorizer.class.name``,
``super.users``), delegation tokens (``delegation.token.*``) and the password encoder of dynamic
secrets (``password.encoder.*``).

Most of them can also be set for one listener as ``listener.name.<listener>.<key>``; BrokerConfig
(``strom.server.config``) reads those and checks what each TLS and SASL listener needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.server.config_keys import (
    HOUR_MS,
    any_text,
    choice,
    choice_int,
    config_key,
    csv_list,
    int_range,
    long_range,
    optional_csv,
    optional_text,
    semicolon_list,
    text,
    upper_text,
)
from strom.storage.log_config import ConfigError, parse_bool, parse_choice

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")  # GSSAPI is not served


def parse_client_auth(key: str, raw: str) -> str:
    return parse_choice(key, str(raw).strip().lower(), ("none", "requested", "required"))


def parse_mechanisms(key: str, raw: str) -> tuple[str, ...]:
    return tuple(m.upper() for m in csv_list(key, raw))


def parse_mapping_rules(key: str, raw: str) -> str:
    from strom.security.principal import PrincipalMapper

    PrincipalMapper.parse(key, str(raw))  # fails here, naming the key, rather than at the first login
    return str(raw).strip()


def parse_authorizer_class(key: str, raw: str) -> str | None:
    from strom.security.authorizer import AUTHORIZER_CLASS_NAMES

    name = str(raw).strip()
    if name and name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError(
            key, f"{name!r} is not an authorizer strom has; use one of {', '.join(AUTHORIZER_CLASS_NAMES)}"
        )
    return name or None


@dataclass(frozen=True)
class SecurityKeys:
    """TLS, SASL, authorization, delegation tokens and the password encoder."""

    # --- security: TLS (listener.name.<listener>.ssl.* overrides a key for one listener)
    ssl_keystore_type: str = config_key(
        "ssl.keystore.type", "PEM", upper_text, "Keystore format; strom reads PEM only (Kafka's default is JKS)."
    )
    ssl_keystore_location: str | None = config_key(
        "ssl.keystore.location",
        None,
        optional_text,
        "PEM file with the private key and certificate chain of TLS listeners.",
    )
    ssl_keystore_password: str | None = config_key(
        "ssl.keystore.password",
        None,
        optional_text,
        "Accepted for compatibility; a PEM key's password is ssl.key.password.",
        sensitive=True,
    )
    ssl_keystore_certificate_chain: str | None = config_key(
        "ssl.keystore.certificate.chain",
        None,
        optional_text,
        "The certificate chain inline, in PEM (instead of ssl.keystore.location).",
        sensitive=True,
    )
    ssl_keystore_key: str | None = config_key(
        "ssl.keystore.key",
        None,
        optional_text,
        "The private key inline, in PEM (with ssl.keystore.certificate.chain).",
        sensitive=True,
    )
    ssl_key_password: str | None = config_key(
        "ssl.key.password", None, optional_text, "Password of an encrypted private key.", sensitive=True
    )
    ssl_truststore_type: str = config_key(
        "ssl.truststore.type", "PEM", upper_text, "Truststore format; strom reads PEM only (Kafka's default is JKS)."
    )
    ssl_truststore_location: str | None = config_key(
        "ssl.truststore.location",
        None,
        optional_text,
        "PEM file of CA certificates that client (and peer broker) certificates are checked against.",
    )
    ssl_truststore_password: str | None = config_key(
        "ssl.truststore.password",
        None,
        optional_text,
        "Accepted for compatibility; a PEM truststore has no password.",
        sensitive=True,
    )
    ssl_truststore_certificates: str | None = config_key(
        "ssl.truststore.certificates",
        None,
        optional_text,
        "CA certificates inline, in PEM (instead of ssl.truststore.location).",
        sensitive=True,
    )
    ssl_client_auth: str = config_key(
        "ssl.client.auth",
        "none",
        parse_client_auth,
        "none, requested or required: whether TLS clients must present a certificate; its DN is then the principal.",
    )
    ssl_enabled_protocols: tuple[str, ...] = config_key(
        "ssl.enabled.protocols", ("TLSv1.2", "TLSv1.3"), csv_list, "TLS versions accepted."
    )
    ssl_protocol: str = config_key(
        "ssl.protocol",
        "TLSv1.3",
        text,
        "Accepted for compatibility: the highest of ssl.enabled.protocols both sides share is negotiated.",
    )
    ssl_cipher_suites: tuple[str, ...] | None = config_key(
        "ssl.cipher.suites",
        None,
        optional_csv,
        "Cipher suites allowed (IANA or OpenSSL names); null: OpenSSL's defaults.",
    )
    ssl_endpoint_identification_algorithm: str = config_key(
        "ssl.endpoint.identification.algorithm",
        "https",
        any_text,
        "https: a broker checks a peer broker's certificate names its host; empty: no check.",
    )
    ssl_principal_mapping_rules: str = config_key(
        "ssl.principal.mapping.rules",
        "DEFAULT",
        parse_mapping_rules,
        "Rules from a client certificate's DN to a user name: RULE:pattern/replacement/[LU], ..., DEFAULT.",
    )
    # --- dynamic broker configs (KIP-226): how secrets set at run time are stored (strom.security.password_encoder)
    password_encoder_secret: str | None = config_key(
        "password.encoder.secret",
        None,
        optional_text,
        "Secret that encodes the secrets of dynamic broker configs in the metadata store; the same on every broker.",
        sensitive=True,
    )
    password_encoder_old_secret: str | None = config_key(
        "password.encoder.old.secret",
        None,
        optional_text,
        "The previous password.encoder.secret: stored secrets encoded with it are read, then re-encoded.",
        sensitive=True,
    )
    password_encoder_keyfactory_algorithm: str = config_key(
        "password.encoder.keyfactory.algorithm",
        "PBKDF2WithHmacSHA512",
        choice("PBKDF2WithHmacSHA512", "PBKDF2WithHmacSHA256", "PBKDF2WithHmacSHA1"),
        "Key derivation of the password encoder.",
    )
    password_encoder_cipher_algorithm: str = config_key(
        "password.encoder.cipher.algorithm",
        "AES/CBC/PKCS5Padding",
        choice("AES/CBC/PKCS5Padding"),
        "Cipher of the password encoder (strom has Kafka's default only).",
    )
    password_encoder_key_length: int = config_key(
        "password.encoder.key.length", 128, choice_int(128, 192, 256), "Key length of the password encoder, in bits."
    )
    password_encoder_iterations: int = config_key(
        "password.encoder.iterations", 4096, int_range(1024), "PBKDF2 iterations of the password encoder."
    )
    # --- security: SASL (listener.name.<listener>.<mechanism>.sasl.jaas.config holds the users)
    sasl_enabled_mechanisms: tuple[str, ...] = config_key(
        "sasl.enabled.mechanisms",
        ("GSSAPI",),
        parse_mechanisms,
        "SASL mechanisms SASL listeners offer; strom serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (others are dropped with a warning).",
    )
    sasl_mechanism_inter_broker_protocol: str = config_key(
        "sasl.mechanism.inter.broker.protocol",
        "GSSAPI",
        upper_text,
        "SASL mechanism brokers log in to each other with, when the inter-broker listener uses SASL.",
    )
    connections_max_reauth_ms: int = config_key(
        "connections.max.reauth.ms",
        0,
        long_range(0),
        "Lifetime of a SASL session (KIP-368): a client must re-authenticate within it or its connection is closed at its next request; 0: sessions last as long as their connection. Per listener and mechanism as in Kafka: listener.name.LISTENER.MECHANISM.connections.max.reauth.ms.",
    )
    # --- security: SASL/OAUTHBEARER's secured validator (KIP-768), per listener as listener.name.L.oauthbearer.KEY
    sasl_oauthbearer_jwks_endpoint_url: str | None = config_key(
        "sasl.oauthbearer.jwks.endpoint.url",
        None,
        optional_text,
        "JWKS (http, https or file URL) whose keys verify OAUTHBEARER tokens, with listener.name.L.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler.",
    )
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = config_key(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        HOUR_MS,
        long_range(1),
        "How often the JWKS is fetched again (sooner when a token names an unknown kid).",
    )
    sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: int = config_key(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        100,
        long_range(0),
        "First wait before fetching the JWKS again after a failure; doubled per failure.",
    )
    sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms: int = config_key(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        10000,
        long_range(0),
        "Longest wait between failed JWKS fetches.",
    )
    sasl_oauthbearer_expected_audience: tuple[str, ...] | None = config_key(
        "sasl.oauthbearer.expected.audience",
        None,
        optional_csv,
        "Audiences (comma-separated) an OAUTHBEARER token's aud must name one of; unset: aud is not checked.",
    )
    sasl_oauthbearer_expected_issuer: str | None = config_key(
        "sasl.oauthbearer.expected.issuer",
        None,
        optional_text,
        "The iss an OAUTHBEARER token must carry; unset: iss is not checked.",
    )
    sasl_oauthbearer_sub_claim_name: str = config_key(
        "sasl.oauthbearer.sub.claim.name",
        "sub",
        text,
        "The claim whose value is the principal (User:<value>) of an OAUTHBEARER login.",
    )
    sasl_oauthbearer_scope_claim_name: str = config_key(
        "sasl.oauthbearer.scope.claim.name", "scope", text, "The claim holding an OAUTHBEARER token's scope."
    )
    sasl_oauthbearer_clock_skew_seconds: int = config_key(
        "sasl.oauthbearer.clock.skew.seconds",
        30,
        int_range(0),
        "How far the broker's clock may be from the token issuer's when exp and iat are checked.",
    )
    # --- security: authorization (ACLs in /kafka-acl, managed with strom acls)
    authorizer_class_name: str | None = config_key(
        "authorizer.class.name",
        None,
        parse_authorizer_class,
        "The ACL authorizer (strom's, or Kafka's AclAuthorizer/StandardAuthorizer class names, which select it); empty: every request is allowed.",
    )
    super_users: tuple[str, ...] = config_key(
        "super.users",
        (),
        semicolon_list,
        "Semicolon list of principals (User:admin;User:broker) allowed everything; put the inter-broker principal here.",
    )
    allow_everyone_if_no_acl_found: bool = config_key(
        "allow.everyone.if.no.acl.found",
        False,
        parse_bool,
        "Whether a resource no ACL names is open to everyone (with the authorizer on).",
    )
    # --- security: delegation tokens (KIP-48; strom.security.delegation_tokens)
    delegation_token_secret_key: str | None = config_key(
        "delegation.token.secret.key",
        None,
        optional_text,
        "Secret that signs delegation tokens (the same on every broker); unset: delegation tokens are disabled.",
        sensitive=True,
    )
    delegation_token_master_key: str | None = config_key(
        "delegation.token.master.key",
        None,
        optional_text,
        "The old name of delegation.token.secret.key, used when that is not set.",
        sensitive=True,
    )
    delegation_token_max_lifetime_ms: int = config_key(
        "delegation.token.max.lifetime.ms",
        7 * 24 * HOUR_MS,
        long_range(1),
        "Longest a delegation token can live, however often it is renewed.",
    )
    delegation_token_expiry_time_ms: int = config_key(
        "delegation.token.expiry.time.ms",
        24 * HOUR_MS,
        long_range(1),
        "How long a delegation token lives after creation or renewal unless renewed (its default renew period).",
    )
    delegation_token_expiry_check_interval_ms: int = config_key(
        "delegation.token.expiry.check.interval.ms",
        HOUR_MS,
        long_range(1),
        "How often expired delegation tokens are removed.",
    )
