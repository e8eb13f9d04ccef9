"""Whether files this process holds open have changed since they were last checked, in one
system call: an inotify watch on each file's inode (Linux, local filesystems).

``Index.intact`` runs before every lookup. Asking each of a generation's 14 mapped files for
its size and mtime (``fstat``) costs 14 system calls; the watch needs one ``poll`` while
nothing happens, and the files are ``fstat``-ed again only after an event (a write, a
truncation, a touch) on one of them. Where inotify is missing or cannot be trusted (another
OS, a network or FUSE filesystem whose other clients' writes raise no event, a process
forked from the one that made the watch, the kernel's watch limits), there is no watch and
the caller checks every file each time, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import struct
import sys
import threading
import weakref
from collections.abc import Callable

#: What changes a file's size or mtime (write, truncate, utime) or its links, and the
#: kernel's own notices (watch removed, queue overflowed, filesystem unmounted).
_FILE_EVENTS = 0x2 | 0x4 | 0x8 | 0x400  # IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF
_GONE = 0x8000 | 0x2000  # IN_IGNORED | IN_UNMOUNT: the watch no longer reports anything
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)

#: Filesystems whose every change on this machine raises inotify events (``statfs`` f_type):
#: ext2/3/4, xfs, btrfs, tmpfs, overlayfs, zfs, f2fs.
_LOCAL = {0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x794C7630, 0x2FC12FC1, 0xF2F52010}

_forks = [0]  # bumped in a forked child: a watch made before never answers there
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _forks.__setitem__(0, _forks[0] + 1))

_libc = None


def _c_library():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _local_filesystem(path: str) -> bool:
    """Whether ``path`` is on a filesystem of ``_LOCAL`` (``statfs``'s first field)."""
    buffer = ctypes.create_string_buffer(256)
    if _c_library().statfs(os.fsencode(path), buffer) != 0:
        return False
    return ctypes.c_long.from_buffer(buffer).value in _LOCAL


class FileWatch:
    """inotify watches on the inodes of some open files (through ``/proc/self/fd``, so the
    very files held open, whatever their names point to now).

    ``settled()``: no event since the files were last found unchanged by ``check``; when
    not settled, the caller checks them through ``check``.
    """

    def __init__(self, fd: int):
        self._fd = fd
        self._threads = threading.local()  # a poll object each: one may not be polled twice
        self._forks = _forks[0]
        self._settled = False
        self._usable = True
        self.lock = threading.Lock()
        weakref.finalize(self, _close, fd)

    @classmethod
    def over(cls, fds: list[int], directory: str) -> FileWatch | None:
        """A watch on these open files (on the filesystem of ``directory``), or None where
        there can be none."""
        if not sys.platform.startswith("linux") or not fds:
            return None
        try:
            if not _local_filesystem(directory):
                return None
            libc = _c_library()
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        watch = cls(fd)
        for held in fds:
            if libc.inotify_add_watch(fd, f"/proc/self/fd/{held}".encode(), _FILE_EVENTS) < 0:
                return None  # (closed by its finalizer)
        return watch

    def settled(self) -> bool:
        """Nothing happened to the files since they were last found unchanged: one ``poll``,
        no wait. (Polled before the flag is read: ``check`` clears it before draining. A
        poll object per thread: CPython refuses one polled by two threads at once.)"""
        poller = getattr(self._threads, "poll", None)
        if poller is None:
            poller = self._threads.poll = select.poll()
            poller.register(self._fd, select.POLLIN)
        return not poller.poll(0) and self._settled and self._forks == _forks[0]

    def check(self, unchanged: Callable[[], bool]) -> bool:
        """``unchanged()`` (the caller's own check of the files), the events so far read
        and dropped first, so any change after them shows up in the next ``settled()``."""
        with self.lock:
            self._settled = False
            ours = self._usable and self._forks == _forks[0]
            if ours:
                self._drain()
            ok = unchanged()
            self._settled = ok and ours and self._usable
            return ok

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                self._usable = False
                return
            at = 0
            while at + _EVENT.size <= len(data):
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, at)
                if mask & _GONE:
                    self._usable = False  # a file no longer watched: check them every time
                at += _EVENT.size + length


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
