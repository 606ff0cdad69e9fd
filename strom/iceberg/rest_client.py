"""pyiceberg's RestCatalog as the brokers use it (``iceberg.catalog.type=rest``).

Three things are added to the client. Every failure to reach the catalog (refused, timed out,
TLS) becomes ``CatalogUnreachable``, one line naming ``iceberg.rest.catalog.uri``, which the
translator logs and counts as a failed round; and every request has a timeout
(``REQUEST_TIMEOUT_S``: requests has none by default, so a catalog that accepts and never answers
would hold the translation worker for good). With ``iceberg.rest.catalog.ssl.ca.location`` the
sessions ignore the environment: requests lets REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE override a
session's own CA (psf/requests#3829). And a catalog is opened once per process and settings:
opening asks the catalog's config and, with a credential, a token, which a round every few hundred
milliseconds would otherwise repeat (the catalog keeping a token of each); tables are loaded anew
at every use, and pyiceberg renews an expired token on the 401 it gets.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

REQUEST_TIMEOUT_S = 30.0

Properties = tuple[tuple[str, Any], ...]  # CatalogSettings.rest: pyiceberg's properties, nested ones as pairs
_opened: dict[tuple[str, Properties], Catalog] = {}
_opened_lock = threading.Lock()


class CatalogUnreachable(Exception):
    """The REST catalog did not answer (or refused the broker's credentials): one clear line."""


def _unreachable(uri: str, exc: BaseException) -> CatalogUnreachable:
    return CatalogUnreachable(
        f"the Iceberg REST catalog {uri} (iceberg.rest.catalog.uri) cannot be used: {type(exc).__name__}: {exc}"
    )


def open_rest_catalog(uri: str, properties: Properties) -> Catalog:
    """The catalog at ``uri`` with pyiceberg's ``properties`` (strom.iceberg.table.CatalogSettings)."""
    with _opened_lock:
        found = _opened.get((uri, properties))
        if found is None:
            found = _opened[(uri, properties)] = _open(uri, properties)
        return found


def _open(uri: str, given: Properties) -> Catalog:
    import requests
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import RESTError
    from requests.adapters import HTTPAdapter

    class Adapter(HTTPAdapter):
        def send(self, request: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = REQUEST_TIMEOUT_S
            try:
                return super().send(request, **kwargs)
            except requests.RequestException as exc:
                raise _unreachable(uri, exc) from None

    pinned = any(key == "ssl" for key, _ in given)

    class StromRestCatalog(RestCatalog):
        def _config_headers(self, session: Any) -> None:  # every session, before its first request
            super()._config_headers(session)
            session.mount("http://", Adapter())
            session.mount("https://", Adapter())
            if pinned:
                session.trust_env = False

    properties = {k: dict(v) if isinstance(v, tuple) else v for k, v in given}
    try:
        return StromRestCatalog("strom", uri=uri, **cast("dict[str, str]", properties))
    except (requests.RequestException, RESTError, OSError) as exc:
        raise _unreachable(uri, exc) from None
