"""TLS contexts built from Kafka's ``ssl.*`` keys, for one listener (server side) or for inter-broker clients.

Only PEM is read (``ssl.keystore.type=PEM``): a keystore is a file holding the private key and the
certificate chain (``ssl.keystore.location``), or the two inline (``ssl.keystore.certificate.chain``
and ``ssl.keystore.key``); a truststore is a file of CA certificates (``ssl.truststore.location``)
or the certificates inline (``ssl.truststore.certificates``). A key that names something missing
or unreadable raises ConfigError naming that key, so a broker does not start half-secured.

``ssl.cipher.suites`` takes Kafka's (IANA) names or OpenSSL's. Python's ssl module cannot narrow
the TLS 1.3 suites: listing no TLS 1.3 suite turns TLS 1.3 off, listing only some leaves all on
(said once in the log).
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable
from typing import Any

from strom.storage.log_config import ConfigError

log = logging.getLogger("strom.security")

# key -> (effective value, the key that supplied it: "ssl.x" or "listener.name.<l>.ssl.x")
Setting = Callable[[str], tuple[Any, str]]

PROTOCOL_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
CLIENT_AUTH_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
TLS13_SUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)
_KEY_EXCHANGES = {
    "RSA": "",
    "ECDHE_RSA": "ECDHE-RSA",
    "ECDHE_ECDSA": "ECDHE-ECDSA",
    "DHE_RSA": "DHE-RSA",
    "DHE_DSS": "DHE-DSS",
    "PSK": "PSK",
    "DHE_PSK": "DHE-PSK",
    "ECDHE_PSK": "ECDHE-PSK",
    "RSA_PSK": "RSA-PSK",
}
_warned_tls13 = False


def openssl_cipher_name(name: str) -> str:
    """``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` -> ``ECDHE-RSA-AES128-GCM-SHA256``; other names unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, cipher = name[4:].split("_WITH_", 1)
    cipher = re.sub(r"^(AES|CAMELLIA|ARIA)_(\d+)_", r"\1\2_", cipher).replace("_CBC_", "_")
    cipher = cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305").replace("_", "-")
    prefix = _KEY_EXCHANGES.get(exchange, exchange.replace("_", "-"))
    return f"{prefix}-{cipher}" if prefix else cipher


def _protocols(context: ssl.SSLContext, setting: Setting) -> None:
    enabled, key = setting("ssl.enabled.protocols")
    versions = []
    for name in enabled:
        if name not in PROTOCOL_VERSIONS:
            raise ConfigError(key, f"unknown protocol {name!r}; use {', '.join(PROTOCOL_VERSIONS)}")
        versions.append(PROTOCOL_VERSIONS[name])
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    suites, suites_key = setting("ssl.cipher.suites")
    if not suites:
        return
    tls13 = [s for s in suites if s in TLS13_SUITES]
    older = [openssl_cipher_name(s) for s in suites if s not in TLS13_SUITES]
    if older:
        try:
            context.set_ciphers(":".join(older))
        except ssl.SSLError:
            raise ConfigError(suites_key, f"none of {', '.join(suites)} is a cipher suite this OpenSSL knows") from None
    elif context.minimum_version < ssl.TLSVersion.TLSv1_3:
        context.minimum_version = ssl.TLSVersion.TLSv1_3  # only TLS 1.3 suites listed
    if not tls13 and context.maximum_version >= ssl.TLSVersion.TLSv1_3:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    if context.minimum_version > context.maximum_version:
        raise ConfigError(suites_key, "no listed cipher suite belongs to a protocol in ssl.enabled.protocols")
    global _warned_tls13
    if tls13 and len(tls13) < len(TLS13_SUITES) and not _warned_tls13:
        _warned_tls13 = True
        log.warning(
            "%s lists some TLS 1.3 suites; Python's ssl module cannot narrow TLS 1.3 suites, "
            "so all of them stay enabled",
            suites_key,
        )


def _load_keystore(context: ssl.SSLContext, setting: Setting, required: bool) -> bool:
    kind, kind_key = setting("ssl.keystore.type")
    location, location_key = setting("ssl.keystore.location")
    chain, chain_key = setting("ssl.keystore.certificate.chain")
    key, key_key = setting("ssl.keystore.key")
    password, _ = setting("ssl.key.password")
    if kind != "PEM":
        raise ConfigError(kind_key, f"strom reads PEM keystores only, not {kind}")
    if location and (chain or key):
        raise ConfigError(chain_key, f"set either {location_key} or the inline chain and key, not both")
    if location:
        _load_chain(context, location, None, password, location_key)
        return True
    if chain or key:
        if not (chain and key):
            raise ConfigError(
                key_key if chain else chain_key,
                "an inline keystore needs both the certificate "
                "chain (ssl.keystore.certificate.chain) and the key (ssl.keystore.key)",
            )
        # load_cert_chain reads files only: the inline PEM goes through a private temporary directory
        with tempfile.TemporaryDirectory(prefix="strom-keystore-") as directory:
            os.chmod(directory, 0o700)
            chain_path, key_path = os.path.join(directory, "chain.pem"), os.path.join(directory, "key.pem")
            for path, text in ((chain_path, chain), (key_path, key)):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
                    handle.write(_pem_text(text))
            _load_chain(context, chain_path, key_path, password, chain_key, f"{chain_key} and {key_key}")
        return True
    if required:
        raise ConfigError(
            location_key,
            "a TLS listener needs a certificate: set ssl.keystore.location, or "
            "ssl.keystore.certificate.chain and ssl.keystore.key (listener.name.<listener>. prefix "
            "for one listener)",
        )
    return False


def _pem_text(text: str) -> str:
    """Inline PEM often arrives on one line of a properties file: rebuild the line breaks OpenSSL needs."""
    blocks = re.findall(r"(-----BEGIN ([A-Z0-9 ]+)-----)(.*?)(-----END \2-----)", text, re.S)
    if not blocks:
        return text
    out = []
    for begin, _, body, end in blocks:
        headers, data = "", body
        if ":" in body:  # an encrypted key's Proc-Type/DEK-Info headers keep their own lines
            head, _, data = body.strip().rpartition("\n\n") if "\n\n" in body else ("", "", body)
            headers = head.strip() + "\n\n" if head else ""
        data = re.sub(r"\s+", "", data)
        out.append(begin + "\n" + headers + "\n".join(data[i : i + 64] for i in range(0, len(data), 64)) + "\n" + end)
    return "\n".join(out) + "\n"


def _load_chain(
    context: ssl.SSLContext, certfile: str, keyfile: str | None, password: str | None, key: str, what: str | None = None
) -> None:
    if keyfile is None and not os.access(certfile, os.R_OK):
        reason = "does not exist" if not os.path.exists(certfile) else "is not readable"
        raise ConfigError(key, f"{certfile} {reason}")
    try:
        context.load_cert_chain(certfile, keyfile, password=password or None)
    except ssl.SSLError as exc:
        hint = " (is ssl.key.password right?)" if "decrypt" in str(exc).lower() or "bad" in str(exc).lower() else ""
        raise ConfigError(
            key, f"no usable private key and certificate chain in {what or certfile}: {exc.reason or exc}{hint}"
        ) from None
    except OSError as exc:
        raise ConfigError(key, f"cannot read {certfile}: {exc.strerror or exc}") from None


def _load_truststore(context: ssl.SSLContext, setting: Setting) -> bool:
    kind, kind_key = setting("ssl.truststore.type")
    location, location_key = setting("ssl.truststore.location")
    certificates, certificates_key = setting("ssl.truststore.certificates")
    if kind != "PEM":
        raise ConfigError(kind_key, f"strom reads PEM truststores only, not {kind}")
    try:
        if location:
            if not os.access(location, os.R_OK):
                reason = "does not exist" if not os.path.exists(location) else "is not readable"
                raise ConfigError(location_key, f"{location} {reason}")
            context.load_verify_locations(cafile=location)
            return True
        if certificates:
            context.load_verify_locations(cadata=_pem_text(certificates))
            return True
    except ssl.SSLError as exc:
        source = location_key if location else certificates_key
        raise ConfigError(
            source, f"no usable CA certificate in {location or 'the inline value'}: {exc.reason or exc}"
        ) from None
    return False


def server_context(setting: Setting) -> ssl.SSLContext:
    """The context of one SSL or SASL_SSL listener; ConfigError names the key at fault."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(context, setting, required=True)
    client_auth, auth_key = setting("ssl.client.auth")
    trusted = _load_truststore(context, setting)
    if client_auth != "none" and not trusted:
        raise ConfigError(
            auth_key,
            f"ssl.client.auth={client_auth} needs CA certificates to check client "
            "certificates against: set ssl.truststore.location",
        )
    context.verify_mode = CLIENT_AUTH_MODES[client_auth]
    _protocols(context, setting)
    return context


def client_context(setting: Setting) -> ssl.SSLContext:
    """The context a broker uses towards other brokers' TLS listeners (its keystore, if any, as client certificate)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    identification, _ = setting("ssl.endpoint.identification.algorithm")
    context.check_hostname = (identification or "").lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    if not _load_truststore(context, setting):
        context.load_default_certs()
    _load_keystore(context, setting, required=False)
    _protocols(context, setting)
    return context


def keystore_identity(setting: Setting) -> tuple[str, tuple[str, ...]] | None:
    """The subject and subject alternative names of the keystore's certificate (the first of its
    chain), as Kafka's CertificateEntries compares them; None without a keystore. A certificate put
    in service at run time must keep both, so clients that check them keep connecting."""
    from cryptography import x509

    location, location_key = setting("ssl.keystore.location")
    chain, _ = setting("ssl.keystore.certificate.chain")
    if location:
        try:
            with open(location, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise ConfigError(location_key, f"cannot read {location}: {exc.strerror or exc}") from None
    elif chain:
        data = _pem_text(chain).encode()
    else:
        return None
    try:
        certificate = x509.load_pem_x509_certificates(data)[0]
    except ValueError:
        raise ConfigError(location_key, f"no certificate in {location or 'the inline chain'}") from None
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        alternatives = tuple(sorted(f"{type(name).__name__}:{name.value}" for name in names))
    except x509.ExtensionNotFound:
        alternatives = ()
    return certificate.subject.rfc4514_string(), alternatives


def has_truststore(setting: Setting) -> bool:
    return bool(setting("ssl.truststore.location")[0] or setting("ssl.truststore.certificates")[0])
