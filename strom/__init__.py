"""strom: a Kafka-compatible log."""

# The Kafka release whose wire protocol, configs and on-disk format strom follows: strom serves the
# request versions this release serves (server/legacy.py keeps those Kafka 4 removed), and
# inter.broker.protocol.version defaults to it.
KAFKA_VERSION = "3.9"


def version_line() -> str:
    """``strom --version``: strom's version, the Kafka it follows and the Python it runs on."""
    import platform
    from importlib import metadata

    try:
        own = metadata.version("strom")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        own = "unknown"
    return f"strom {own} (Kafka {KAFKA_VERSION} protocol and configs, Python {platform.python_version()})"
