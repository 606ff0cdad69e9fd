"""Small real filesystems for disk-fault tests: a size-limited tmpfs, and ext4 on a thin loop device.

Mounting needs root, which the test machine has; a mount that fails raises, so a test that
needs a full disk fails loudly instead of passing without one. Every mount is undone on exit,
also when the test fails (lazily, if a process still holds a file there).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


def _run(*cmd: str) -> str:
    result = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout.strip()


def _unmount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True, timeout=60).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=60)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's syntax: 2m, 512k) at ``path``: it fills up for real (ENOSPC)."""
    path.mkdir(parents=True, exist_ok=True)
    _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    try:
        yield path
    finally:
        _unmount(path)


def resize_tmpfs(path: Path, size: str) -> None:
    _run("mount", "-o", f"remount,size={size}", str(path))


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


class ThinDisk:
    """ext4 on a loop device whose sparse image sits on a small tmpfs: I/O errors for real.

    The filesystem believes it has ``apparent`` bytes; the image can take only ``backing``.
    ``exhaust`` fills the image's tmpfs and has one write-back fail (ENOSPC from the device),
    which aborts the ext4 journal: from then on fsync on the filesystem fails with EIO, on
    data that write() accepted, which is the failing-disk case (no device-mapper needed).
    ``repair`` makes room, checks the filesystem (e2fsck, as after a disk replacement) and
    mounts it again. Everything is undone on exit.
    """

    def __init__(self, path: Path, apparent: str = "256m", backing: str = "32m"):
        self.path = path
        self.back = path.parent / f"{path.name}.backing"
        self.image = self.back / "disk.img"
        self.apparent = apparent
        self.backing = backing
        self.loop = ""
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> ThinDisk:
        try:
            self._stack.enter_context(tmpfs(self.back, self.backing))
            _run("truncate", "-s", self.apparent, str(self.image))
            _run("mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0", str(self.image))
            self.loop = _run("losetup", "-f", "--show", str(self.image))
            self._stack.callback(lambda: subprocess.run(["losetup", "-d", self.loop], capture_output=True, timeout=60))
            self._mount()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        _run("mount", "-o", "errors=continue", self.loop, str(self.path))
        self._stack.callback(_unmount, self.path)

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def exhaust(self) -> str:
        """Fill the backing tmpfs and fail one write-back; returns the errno that write-back got."""
        fd = os.open(self.back / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            while True:
                os.write(fd, b"\0" * 65536)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)
        fd = os.open(self.path / "sacrificial", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.write(fd, os.urandom(1 << 20))
            os.fsync(fd)
        except OSError as exc:
            return errno.errorcode[exc.errno]
        finally:
            os.close(fd)
        raise AssertionError("an fsync on the thin disk succeeded with its backing full")

    def repair(self) -> int:
        """Unmount, make room, e2fsck -fy, mount again; returns e2fsck's exit status (0, 1 or 2)."""
        _unmount(self.path)
        os.unlink(self.back / "filler")
        status = subprocess.run(["e2fsck", "-f", "-y", str(self.loop)], capture_output=True, text=True, timeout=120)
        if status.returncode not in (0, 1, 2):
            raise RuntimeError(f"e2fsck could not repair {self.image}: {status.stdout}{status.stderr}")
        _run("mount", "-o", "errors=continue", self.loop, str(self.path))
        return status.returncode
