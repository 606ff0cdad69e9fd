"""The error of a log dir the broker cannot use as it stands: damaged or foreign metadata, a
partition found in two dirs, a lock another broker holds, a move whose copy does not match.

It stops startup with its message (strom.cli.server_start) instead of a traceback; the modules that
raise it (log_manager, log_dir_moves, dir_lock) all sit above this one.
"""

from __future__ import annotations


class LogDirError(RuntimeError):
    pass
