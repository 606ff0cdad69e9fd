"""One data directory, one broker: an exclusive lock on ``<dir>/.lock``, as Kafka takes.

Two brokers writing the same partition logs, checkpoints and metadata file corrupt them
silently, so a broker locks every log dir before it writes anything in any of them, and holds the
locks for its whole life. A second broker on the same dir (another process, or another broker
thread of the same process) fails at once with Kafka's message, naming the dir and the process
that holds it.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on an open descriptor: it belongs to that open file,
so two opens in one process exclude each other as two processes do, and the kernel drops it
when the holder dies however it dies. A ``.lock`` file a SIGKILLed broker left behind is only
a file, never an obstacle to the next start. The holder writes its pid into the file; the
refusal names the pid from ``/proc/locks`` (what the kernel says holds the lock), or from the
file where ``/proc/locks`` does not tell (another pid namespace).

The descriptor is not inherited across exec (Python's default), so no process the broker starts
(its cleaner processes are spawned) keeps a dead broker's directory locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

from strom.storage.log_dir_error import LogDirError

LOCK_FILE = ".lock"


class LogDirLockedError(LogDirError):
    """Another broker holds the directory's lock."""

    def __init__(self, directory: str, holder: int | None):
        self.directory = directory
        self.holder = holder
        by = f" (pid {holder})" if holder else ""
        super().__init__(
            f"Failed to acquire lock on file {LOCK_FILE} in {directory}. "
            f"A strom broker in another process or thread{by} is using this directory."
        )


def _holder_from_proc_locks(fd: int) -> int | None:
    """The pid /proc/locks gives for a FLOCK on the file open as ``fd`` (None if it does not say)."""
    st = os.fstat(fd)
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as handle:
            for line in handle:
                fields = line.split()
                # "1: FLOCK  ADVISORY  WRITE 5484 fe:00:2155336 0 EOF"; blocked waiters have "->" after the id
                if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK":
                    continue
                if fields[5] == wanted and int(fields[4]) > 0:
                    return int(fields[4])
    except (OSError, ValueError):
        pass
    return None


def _holder_from_file(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


class DirLock:
    """The held lock of one directory; ``release()`` (or the process's end) gives it up."""

    def __init__(self, directory: str, fd: int):
        self.directory = directory
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the open file drops the flock

    def __repr__(self) -> str:
        return f"<DirLock {self.directory} {'held' if self.held else 'released'}>"


def acquire(directory: str) -> DirLock:
    """Lock ``directory`` (created if missing) or raise LogDirLockedError naming the holder.

    Nothing but the directory itself and its ``.lock`` file is created or written.
    """
    directory = os.path.abspath(directory)
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder_from_proc_locks(fd) or _holder_from_file(fd)
        os.close(fd)
        raise LogDirLockedError(directory, holder) from None
    except BaseException:
        os.close(fd)
        raise
    with contextlib.suppress(OSError):  # the pid is a courtesy for the refusal's message
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return DirLock(directory, fd)


def acquire_all(directories: list[str] | tuple[str, ...]) -> list[DirLock]:
    """Lock every directory, in order; on a refusal release the ones taken and raise it."""
    taken: list[DirLock] = []
    try:
        for directory in directories:
            taken.append(acquire(directory))
    except BaseException:
        for lock in taken:
            lock.release()
        raise
    return taken


def wait_until_free(directory: str, timeout_s: float, poll_s: float = 0.1) -> int | None:
    """Wait (bounded) until no process holds ``directory``'s lock; returns the holder's pid still
    holding it after ``timeout_s`` (0 when unknown), or None once it is free. For a tool that
    starts a broker on a directory whose previous broker may still be shutting down."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not os.path.exists(os.path.join(directory, LOCK_FILE)):
            return None
        try:
            acquire(directory).release()
            return None
        except LogDirLockedError as exc:
            if time.monotonic() >= deadline:
                return exc.holder or 0
        time.sleep(poll_s)
