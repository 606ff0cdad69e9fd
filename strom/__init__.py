"""strom: a Kafka-compatible log."""

# The Kafka release whose configs and on-disk format strom follows: the last one with ZooKeeper,
# which strom's clusters use; inter.broker.protocol.version defaults to it.
KAFKA_VERSION = "3.9"
# The Kafka release whose request versions strom serves at their newest (issue 33: Produce v13,
# ListOffsets v11, transactions v2), while server/legacy.py keeps the old versions Kafka 4 removed.
KAFKA_PROTOCOL_VERSION = "4.1"


def version_line() -> str:
    """``strom --version``: strom's version, the Kafka it follows and the Python it runs on."""
    import platform
    from importlib import metadata

    try:
        own = metadata.version("strom")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        own = "unknown"
    return (
        f"strom {own} (Kafka {KAFKA_PROTOCOL_VERSION} protocol, Kafka {KAFKA_VERSION} configs, "
        f"Python {platform.python_version()})"
    )
