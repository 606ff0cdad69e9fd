"""Why a process cannot start, said in one line that names the setting to change.

Kafka prints "Socket server failed to bind to 127.0.0.1:9092: Address already in use." and exits;
strom raises ``StartupError(key, cause)`` where the key is known (binding a listener, preparing a
log dir, reading the embedded store) and ``strom server-start`` prints it, once, as
``strom server-start: cannot start: <key>: <cause>``, exiting 1 (the traceback only with
``--log-level DEBUG``). Invalid values are ConfigError, found before anything starts (exit 2).

This module imports nothing of strom: every layer may raise its error.
"""

from __future__ import annotations

import errno
import os
import pwd
import socket


class StartupError(Exception):
    """Startup cannot go on; the message names the config key (or command-line option) to look at."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


def bind_failure(key: str, host: str, port: int, exc: OSError) -> StartupError:
    """``exc`` from binding ``host:port`` as ``key`` says, with what the OS tells of the cause."""
    shown = f"[{host}]" if ":" in host else host or "0.0.0.0"
    if isinstance(exc, socket.gaierror):
        return StartupError(key, f"cannot resolve the host of {shown}:{port}: {exc.strerror or exc}")
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        holder = port_holder(port)
        reason += f" (held by {holder})" if holder else ""
    elif exc.errno == errno.EADDRNOTAVAIL:
        reason += " (not an address of this host)"
    elif exc.errno == errno.EACCES and 0 < port < unprivileged_port_start():
        reason += f" (ports below {unprivileged_port_start()} need root or CAP_NET_BIND_SERVICE)"
    return StartupError(key, f"Socket server failed to bind to {shown}:{port}: {reason}")


def unprivileged_port_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 1024


def port_holder(port: int) -> str | None:
    """Who listens on TCP ``port`` ("pid 123: java -cp ... QuorumPeerMain"), where Linux's /proc
    tells: the socket's inode in /proc/net/tcp{,6}, then the process with that inode among its
    descriptors. Another user's processes are not readable unless root: then only their uid."""
    inodes: dict[str, int] = {}  # socket inode -> owner uid
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                next(handle, None)
                for line in handle:
                    # sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
                    fields = line.split()
                    if len(fields) < 10 or int(fields[1].rsplit(":", 1)[1], 16) != port:
                        continue
                    if int(fields[2].rsplit(":", 1)[1], 16) == 0 and fields[9] != "0":  # bound, not a connection
                        inodes[fields[9]] = int(fields[7])
        except (OSError, ValueError, IndexError):
            continue
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in sorted((int(p) for p in os.listdir("/proc") if p.isdigit()), reverse=True):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                    return f"pid {pid}: {_command(pid)}"
            except OSError:
                continue
    uid = next(iter(inodes.values()))
    return f"a process of uid {uid}"


def _command(pid: int, limit: int = 100) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().rstrip(b"\0").decode(errors="replace").split("\0")
    except OSError:
        return "?"
    text = " ".join([os.path.basename(argv[0]), *argv[1:]])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def refusal_in(log_path: str, offset: int = 0, prefix: str = "strom server-start: ") -> str:
    """The one line a broker that could not start printed, read back from the log file its stdout
    and stderr went to, after ``offset`` (where this start's output begins); "" if it printed none.
    For the tools that start brokers as children (``strom cluster start``, ``strom demo``)."""
    try:
        with open(log_path, "rb") as handle:
            handle.seek(offset)
            lines = handle.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return next((line.removeprefix(prefix) for line in reversed(lines) if line.startswith(prefix)), "")


def check_log_dirs(log_dirs: list[str] | tuple[str, ...]) -> None:
    """Refuse log dirs this process could not create, write or fill, before anything is written:
    raises StartupError("log.dirs", ...). Creating them is left to the broker."""
    for log_dir in log_dirs:
        path = os.path.abspath(log_dir)
        existing = path
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            doing = "use log dir" if existing == path else "create log dir"
            raise StartupError("log.dirs", f"cannot {doing} {path}: {existing} is not a directory")
        if not os.access(existing, os.R_OK | os.W_OK | os.X_OK):
            doing = f"log dir {path} is" if existing == path else f"cannot create log dir {path}: {existing} is"
            why = os.strerror(errno.EROFS if _read_only(existing) else errno.EACCES)
            raise StartupError("log.dirs", f"{doing} not writable by user {_user()} ({why})")
        stat = os.statvfs(existing)
        free_blocks = stat.f_bfree if os.geteuid() == 0 else stat.f_bavail  # root may use the reserve
        if free_blocks == 0 or (stat.f_favail == 0 and stat.f_files > 0):
            raise StartupError("log.dirs", f"log dir {path}: {os.strerror(errno.ENOSPC)} ({existing} is full)")


def _read_only(path: str) -> bool:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def _user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"
