"""SASL/OAUTHBEARER (RFC 7628, KIP-255 and KIP-342) with Kafka's two server-side token validators.

The client's only message is a GS2 header and key/value pairs separated by ``\\x01``::

    n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<extension>=<value>\\x01 ...]\\x01

A token that fails validation is answered as Kafka's OAuthBearerSaslServer does: first with the
RFC 7628 JSON error (``{"status":"invalid_token"}``) as a server challenge, then, once the client
has acknowledged it with a single ``\\x01``, with SASL_AUTHENTICATION_FAILED carrying that JSON.
The principal is ``User:<sub>`` and the token's ``exp`` bounds the session (KIP-368): the gate
never lets a session outlive its token.

Which validator a listener uses is Kafka's ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class``:

- unset: Kafka's default, OAuthBearerUnsecuredValidatorCallbackHandler. It accepts *unsigned* JWS
  (``alg: none``) and checks only claims, with the ``unsecuredValidator*`` options of the
  listener's OAuthBearerLoginModule JAAS line. Anyone can mint such a token: for development only.
- OAuthBearerValidatorCallbackHandler (KIP-768): signed JWTs checked with PyJWT against the keys of
  ``sasl.oauthbearer.jwks.endpoint.url`` (http(s), refreshed in the background off the event loop,
  or a file), with the expected audience and issuer, sub and scope claim names and clock skew.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import math
import re
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jwt

from strom.security.jaas import parse_jaas
from strom.security.scram import AuthenticationFailed
from strom.storage.log_config import ConfigError

if TYPE_CHECKING:
    from strom.security.listener_config import ListenerConfig

log = logging.getLogger("strom.security")

MECHANISM = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER_KEY = "sasl.server.callback.handler.class"  # honoured only as listener.name.<l>.oauthbearer.<this>, as Kafka
UNSECURED_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)
SECURED_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",  # Kafka 3.x name
)
JWKS_URL_KEY = "sasl.oauthbearer.jwks.endpoint.url"
# Kafka's message for a malformed client message: the details go to the broker's log only
MALFORMED = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {MECHANISM}"
JWKS_MAX_BYTES = 1 << 20
JWKS_FETCH_TIMEOUT_S = 10
MISSING_KID_QUIET_S = 60  # Kafka's RefreshingHttpsJwks: one expedited refresh per unknown kid a minute
MAX_TIME_S = 1 << 40  # claim times in seconds beyond ~35,000 years are refused: lifetimes stay int64
# JWS algorithms a key of each type may verify; never "none" nor an HMAC one (the JWKS is public)
_ALGORITHMS = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC": ("ES256", "ES384", "ES512", "ES256K"),
    "OKP": ("EdDSA",),
}

# RFC 7628 as Kafka's OAuthBearerClientInitialResponse matches it
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_CLIENT_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01", re.S
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")


class InvalidToken(Exception):
    """The token was refused; ``json()`` is the RFC 7628 error the client is told (no reason in it, as Kafka)."""

    def __init__(self, reason: str, scope: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.scope = scope  # the missing required scope: status insufficient_scope

    def json(self) -> str:
        """Kafka's jsonErrorResponse, byte for byte (clients show it as the error message)."""
        status = "insufficient_scope" if self.scope is not None else "invalid_token"
        text = f'{{"status":"{status}"'
        if self.scope is not None:
            text += f', "scope":"{self.scope}"'
        return text + "}"


@dataclass(frozen=True)
class Token:
    principal: str
    expires_ms: int  # epoch milliseconds
    issued_ms: int | None = None
    scope: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ClientResponse:
    token: str
    authzid: str = ""
    extensions: dict[str, str] = field(default_factory=dict)


def parse_client_response(data: bytes) -> ClientResponse:
    """The client's first message; AuthenticationFailed (Kafka's generic message) when malformed."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("not UTF-8") from None
    match = _CLIENT_RESPONSE.fullmatch(text)
    if match is None:
        raise _malformed("Invalid OAUTHBEARER client first message")
    pairs = dict(pair.split("=", 1) for pair in match["kvpairs"].split("\x01") if pair)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise _malformed("Invalid OAUTHBEARER client first message: 'auth' not specified")
    bearer = _AUTH.fullmatch(auth)
    if bearer is None:
        raise _malformed("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if bearer["scheme"].lower() != "bearer":
        raise _malformed(f"Invalid scheme in OAUTHBEARER client first message: {bearer['scheme']}")
    authzid = (match["authzid"] or "").replace("=2C", ",").replace("=3D", "=")
    return ClientResponse(bearer["token"], authzid, pairs)


def _malformed(detail: str) -> AuthenticationFailed:
    log.info("Malformed OAUTHBEARER client message: %s", detail)
    return AuthenticationFailed(MALFORMED)


def _now_ms() -> int:
    return int(time.time() * 1000)


class OAuthBearerExchange:
    """The server side of one login, driven by the SaslGate like the SCRAM exchange."""

    token_owner: str | None = None  # never a delegation-token login

    def __init__(self, validator: Validator):
        self.validator = validator
        self.username: str | None = None
        self.credential_expires_ms: int | None = None  # the token's exp: the session must end by then
        self.extensions: dict[str, str] = {}
        self._error: str | None = None

    def step(self, data: bytes) -> tuple[bytes, bool]:
        """(reply, done); AuthenticationFailed once a refused token's error has been acknowledged."""
        if data == b"\x01" and self._error is not None:
            raise AuthenticationFailed(self._error)
        self._error = None
        response = parse_client_response(data)
        try:
            try:
                token = self.validator.validate(response.token, _now_ms())
            except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # JSON a parser chokes on
                raise InvalidToken(f"Malformed token: {exc!r}") from None
        except InvalidToken as exc:
            log.info("OAUTHBEARER token refused: %s", exc.reason)
            self._error = exc.json()
            return self._error.encode(), False
        if response.authzid and response.authzid != token.principal:
            raise AuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({response.authzid}) that is "
                f"different from the token's principal name ({token.principal})"
            )
        self.username = token.principal
        self.credential_expires_ms = token.expires_ms
        self.extensions = response.extensions  # KIP-342: Kafka's validators accept every extension
        return b"", True


# -- claims ---------------------------------------------------------------------------------------


def _time_ms(claims: Mapping[str, Any], name: str, required: bool) -> int | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise InvalidToken(f"Required claim missing: {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"The claim named '{name}' was not of type Number: {value!r}")
    if not -MAX_TIME_S <= value <= MAX_TIME_S:  # also NaN and the infinities Python's JSON reader accepts
        raise InvalidToken(f"The claim named '{name}' is out of range: {value!r}")
    # truncated, not rounded: an iat rounded up could land in the broker's current millisecond's
    # future and refuse a token issued that very millisecond ("Issued At ... after the indicated time")
    return math.floor(value * 1000)


def _principal(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if value is None:
        raise InvalidToken(f"Required claim missing: {name}")
    if not isinstance(value, str) or not value.strip():
        raise InvalidToken(f"The claim named '{name}' must be a non-blank string: {value!r}")
    return value


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):  # one scope, as Kafka reads it (it does not split on spaces)
        return frozenset([value.strip()]) if value.strip() else frozenset()
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return frozenset(item.strip() for item in value if item.strip())
    raise InvalidToken(f"The claim named '{name}' was not a string or a list of strings: {value!r}")


def _json_part(part: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, binascii.Error) as exc:
        raise InvalidToken(f"Invalid JWS {what}: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidToken(f"Invalid JWS {what}: not a JSON object")
    return value


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: claims of an unsigned JWS, nothing proves them."""

    keys = None  # nothing to refresh

    def __init__(self, options: Mapping[str, str], key: str = "sasl.jaas.config"):
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub").strip() or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope").strip() or "scope"
        self.required_scope = tuple(options.get("unsecuredValidatorRequiredScope", "").split())
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0").strip() or "0"
        if not skew.isdigit():
            raise ConfigError(
                key, f"unsecuredValidatorAllowableClockSkewMs must be a non-negative integer, not {skew!r}"
            )
        self.skew_ms = int(skew)

    def validate(self, value: str, now_ms: int) -> Token:
        if ".." in value:
            raise InvalidToken("Malformed compact serialization contains '..'")
        parts = value.split(".")
        if len(parts) != 3:
            raise InvalidToken(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"
            )
        header, claims = _json_part(parts[0], "header"), _json_part(parts[1], "claims")
        if header.get("alg") != "none":
            raise InvalidToken("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise InvalidToken("Unsecured JWS must not contain a digital signature")
        principal = _principal(claims, self.principal_claim)
        issued = _time_ms(claims, "iat", False)
        expires = _time_ms(claims, "exp", True)
        assert expires is not None
        if issued is not None and issued > now_ms + self.skew_ms:
            raise InvalidToken(
                f"The Issued At value ({issued} ms) was after the indicated time ({now_ms} ms) "
                f"plus allowable clock skew ({self.skew_ms} ms)"
            )
        if now_ms >= expires + self.skew_ms:
            raise InvalidToken(
                f"The indicated time ({now_ms} ms) minus allowable clock skew ({self.skew_ms} ms) "
                f"was on or after the Expiration Time value ({expires} ms)"
            )
        if issued is not None and expires <= issued:
            raise InvalidToken(f"The Expiration Time ({expires} ms) was not after the Issued At time ({issued} ms)")
        scope = _scope(claims, self.scope_claim)
        missing = [element for element in self.required_scope if element not in scope]
        if missing:
            raise InvalidToken(
                f"The provided scope ({' '.join(sorted(scope))}) was missing a required scope ({missing[0]})",
                scope=f"[{', '.join(self.required_scope)}]",  # Kafka's: a Java list's toString()
            )
        return Token(principal, expires, issued, scope)


# -- KIP-768: signed tokens and the JWKS they are checked against ---------------------------------


class JwksKeys:
    """The verification keys of a JWKS endpoint, by ``kid``, refreshed by ``run`` off the event loop.

    Validation only reads the cache (it runs inside a request): a token whose ``kid`` is unknown is
    refused and wakes the refresher early, as Kafka's RefreshingHttpsJwks does, so a key the
    provider has just rotated in works from the next login on.
    """

    def __init__(
        self, url: str, refresh_ms: int, backoff_ms: int, backoff_max_ms: int, context: ssl.SSLContext | None = None
    ):
        self.url = url
        self.context = context  # https: the CAs trusted for the endpoint (None: the system's)
        self.refresh_ms = refresh_ms
        self.backoff_ms = backoff_ms
        self.backoff_max_ms = max(backoff_max_ms, backoff_ms)
        self.keys: dict[str | None, jwt.PyJWK] = {}
        self.loaded = False
        self._wake = asyncio.Event()
        self._missing: dict[str, float] = {}  # kid -> monotonic time it last woke the refresher

    def read(self) -> str:
        """The JWKS document (blocking: run in a thread)."""
        scheme = urllib.parse.urlsplit(self.url).scheme.lower()
        if scheme == "file":
            with open(urllib.request.url2pathname(urllib.parse.urlsplit(self.url).path), "rb") as f:
                return f.read(JWKS_MAX_BYTES).decode()
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=JWKS_FETCH_TIMEOUT_S, context=self.context) as response:
            return bytes(response.read(JWKS_MAX_BYTES)).decode()

    def load(self, text: str) -> int:
        """Replace the keys with those of a JWKS document; ValueError when it has no usable key."""
        document = json.loads(text)
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ValueError("not a JWKS document (a JSON object with a 'keys' list)")
        keys: dict[str | None, jwt.PyJWK] = {}
        for entry in document["keys"]:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") not in _ALGORITHMS:
                continue
            try:
                keys[entry.get("kid")] = jwt.PyJWK(entry)
            except jwt.PyJWTError as exc:
                log.warning("JWKS %s: key %s skipped: %s", self.url, entry.get("kid"), exc)
        if not keys:
            raise ValueError("no usable signature key (RSA, EC or OKP) in the JWKS")
        self.keys, self.loaded = keys, True
        return len(keys)

    def key_for(self, kid: str | None) -> jwt.PyJWK:
        if not self.loaded:
            raise InvalidToken(f"no keys have been read from {self.url} yet")
        if kid is None:
            if len(self.keys) == 1:
                return next(iter(self.keys.values()))
            raise InvalidToken("the token names no key (kid) and the JWKS has several")
        key = self.keys.get(kid)
        if key is None:
            now = time.monotonic()
            if now - self._missing.get(kid, -MISSING_KID_QUIET_S) >= MISSING_KID_QUIET_S:
                self._missing[kid] = now
                self._wake.set()
            raise InvalidToken(f"no key with kid {kid!r} in the JWKS of {self.url}")
        return key

    async def run(self, stop: asyncio.Event) -> None:
        """Fetch now, then every refresh.ms (early for an unknown kid); back off exponentially on failures."""
        backoff = self.backoff_ms
        while not stop.is_set():
            self._wake.clear()
            try:
                count = self.load(await asyncio.to_thread(self.read))
                log.info("OAUTHBEARER: %d verification keys read from %s", count, self.url)
                backoff, wait_ms = self.backoff_ms, self.refresh_ms
            except (OSError, ValueError) as exc:
                log.warning("OAUTHBEARER: reading the JWKS from %s failed (retry in %d ms): %s", self.url, backoff, exc)
                wait_ms, backoff = backoff, min(backoff * 2, self.backoff_max_ms)
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
            try:
                await asyncio.wait(waits, timeout=wait_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()


class SecuredValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler (KIP-768): a signed JWT from a trusted issuer.

    As Kafka's jose4j consumer: exp and iat are required, alg none is refused, audience (any of
    the expected ones) and issuer are checked when configured, and the clock may be off by skew.
    """

    def __init__(
        self,
        keys: JwksKeys,
        audience: tuple[str, ...] | None,
        issuer: str | None,
        sub_claim: str,
        scope_claim: str,
        skew_s: int,
    ):
        self.keys = keys
        self.audience = list(audience) if audience else None
        self.issuer = issuer
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.skew_s = skew_s

    def validate(self, value: str, now_ms: int) -> Token:
        try:
            header = jwt.get_unverified_header(value)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"Could not parse the access token: {exc}") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        key = self.keys.key_for(kid if isinstance(kid, str) else None)
        allowed = _ALGORITHMS.get(key.key_type or "", ())
        if algorithm not in allowed or (key.algorithm_name not in (None, "") and algorithm != key.algorithm_name):
            raise InvalidToken(f"algorithm {algorithm!r} may not be used with key {kid!r}")
        try:
            claims = jwt.decode(
                value,
                key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.skew_s,
                options={
                    "require": ["exp", "iat"],
                    "verify_aud": self.audience is not None,
                    # times are checked below against the caller's clock, with Kafka's skew rules
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"Could not validate the access token: {exc}") from None
        expires, issued = _time_ms(claims, "exp", True), _time_ms(claims, "iat", True)
        not_before = _time_ms(claims, "nbf", False)
        assert expires is not None and issued is not None
        skew_ms = self.skew_s * 1000
        if now_ms >= expires + skew_ms:
            raise InvalidToken(f"The token expired at {expires} ms (now {now_ms} ms, allowed skew {skew_ms} ms)")
        if issued > now_ms + skew_ms or (not_before is not None and not_before > now_ms + skew_ms):
            raise InvalidToken(f"The token is not valid yet (iat {issued} ms, nbf {not_before} ms, now {now_ms} ms)")
        return Token(_principal(claims, self.sub_claim), expires, issued, _scope(claims, self.scope_claim))


Validator = UnsecuredValidator | SecuredValidator


# -- configuration --------------------------------------------------------------------------------


def _setting(config: ListenerConfig, listener: str, key: str) -> tuple[Any, str]:
    """(value, key): ``listener.name.<l>.oauthbearer.<key>``, else ``listener.name.<l>.<key>``, else ``<key>``."""
    found = config.listener_overrides.get(listener, {}).get(f"oauthbearer.{key}")
    return found if found is not None else config.listener_setting(listener, key)


def handler_class(config: ListenerConfig, listener: str) -> tuple[str | None, str]:
    found = config.listener_overrides.get(listener, {}).get(f"oauthbearer.{HANDLER_KEY}")
    key = f"listener.name.{listener.lower()}.oauthbearer.{HANDLER_KEY}"
    return (str(found[0]).strip() or None, found[1]) if found is not None else (None, key)


def _https_context(options: Mapping[str, str], jaas_key: str) -> ssl.SSLContext | None:
    """Kafka reads the TLS settings for an https JWKS from the login module's options (JaasOptionsUtils):
    ``ssl.truststore.location`` or ``ssl.truststore.certificates`` (PEM) and
    ``ssl.endpoint.identification.algorithm``; without a truststore the system's CAs are trusted."""
    location = options.get("ssl.truststore.location", "").strip()
    certificates = options.get("ssl.truststore.certificates", "").strip()
    kind = options.get("ssl.truststore.type", "PEM").strip().upper()
    if (location or certificates) and kind != "PEM":
        raise ConfigError(jaas_key, f"ssl.truststore.type: strom reads PEM truststores only, not {kind}")
    try:
        context = ssl.create_default_context(cafile=location or None, cadata=certificates or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(jaas_key, f"ssl.truststore of the JWKS endpoint: {exc}") from None
    context.check_hostname = options.get("ssl.endpoint.identification.algorithm", "https").strip().lower() == "https"
    return context


def validator_for(config: ListenerConfig, listener: str, read_files: bool = True) -> Validator:
    """The listener's validator; ConfigError naming the key when its configuration is wrong.

    A file JWKS is read here (at startup, unless ``read_files`` is off for a check of the config
    alone), so a missing or malformed file stops startup; an http(s) one is fetched by
    ``JwksKeys.run`` once the broker serves.
    """
    handler, handler_key = handler_class(config, listener)
    found = config.jaas_config(listener, MECHANISM)
    options: Mapping[str, str] = {}
    if found is not None:
        jaas = parse_jaas(found[1], found[0])
        if jaas.class_name != LOGIN_MODULE:
            raise ConfigError(found[1], f"{MECHANISM} needs {LOGIN_MODULE}, not {jaas.class_name}")
        options = jaas.options
    jaas_key = found[1] if found is not None else f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config"
    if handler is None or handler == UNSECURED_HANDLER:
        return UnsecuredValidator(options, jaas_key)
    if handler not in SECURED_HANDLERS:
        raise ConfigError(
            handler_key, f"strom validates OAUTHBEARER tokens with {SECURED_HANDLERS[0]} or the default, not {handler}"
        )
    url, url_key = _setting(config, listener, JWKS_URL_KEY)
    if not url:
        raise ConfigError(url_key, f"listener {listener} validates OAUTHBEARER tokens with {handler}, which needs it")
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https", "file"):
        raise ConfigError(url_key, f"{url}: the JWKS endpoint must be an http, https or file URL")
    keys = JwksKeys(
        url,
        _setting(config, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms")[0],
        _setting(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")[0],
        _setting(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")[0],
        _https_context(options, jaas_key) if scheme == "https" and read_files else None,
    )
    if scheme == "file" and read_files:
        try:
            keys.load(keys.read())
        except (OSError, ValueError) as exc:
            raise ConfigError(url_key, f"cannot read a JWKS from {url}: {exc}") from None
    return SecuredValidator(
        keys,
        _setting(config, listener, "sasl.oauthbearer.expected.audience")[0],
        _setting(config, listener, "sasl.oauthbearer.expected.issuer")[0],
        _setting(config, listener, "sasl.oauthbearer.sub.claim.name")[0],
        _setting(config, listener, "sasl.oauthbearer.scope.claim.name")[0],
        _setting(config, listener, "sasl.oauthbearer.clock.skew.seconds")[0],
    )
