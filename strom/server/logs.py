"""The broker's log lines: text for people, or one JSON object per line for log collectors.

Kafka configures this in log4j; strom takes ``--log-format`` on ``server-start``. Either way every
line carries the time, level, logger and message, so a collector never parses free text.
"""

from __future__ import annotations

import json
import logging
import sys
import time

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601 with milliseconds), level, logger, message."""

    def format(self, record: logging.LogRecord) -> str:
        seconds = int(record.created)
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str = "INFO", log_format: str = "text") -> None:
    """Log to stdout at ``level`` in ``log_format`` (one of FORMATS), as Kafka's console appender
    does: stderr is left to the one line that says why a broker could not start."""
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {log_format!r}")
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler], force=True)
