"""Opening a file that a user or a repository named: a regular file only, never blocking,
never more than a bound.

A path may be a FIFO (the open would hang), a device or a symlink to `/dev/zero` (a read
would never end), or a kernel interface on /proc (reading /proc/kmsg blocks and consumes the
kernel log). Every read of such a path goes through `open_regular` / `read_regular` /
`read_bounded`, which refuse all of these with a clear OSError or InputError.
"""

from __future__ import annotations

import errno
import functools
import os
import stat

from .errors import InputError

# Kernel and virtual filesystems: their "files" are interfaces (reading /proc/kmsg blocks
# and consumes the kernel log), never something to index or import.
PSEUDO_FS_TYPES = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "debugfs", "tracefs", "securityfs", "cgroup",
    "cgroup2", "configfs", "fusectl", "bpf", "pstore", "efivarfs", "mqueue", "binfmt_misc",
    "autofs", "hugetlbfs", "rpc_pipefs", "nsfs", "selinuxfs",
})
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")


@functools.lru_cache(maxsize=1)
def pseudo_devs() -> frozenset[int]:
    """Device ids of the mounted pseudo-filesystems (read once per process)."""
    points = set(PSEUDO_ROOTS)
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            for line in f.read(1 << 20).splitlines():
                parts = line.split()
                if len(parts) >= 3 and parts[2] in PSEUDO_FS_TYPES:
                    points.add(parts[1].replace("\\040", " "))
    except OSError:
        pass
    devs = set()
    for p in points:
        try:
            devs.add(os.stat(p).st_dev)
        except OSError:
            continue
    # /dev is usually devtmpfs, but a container may mount a plain tmpfs there: count it
    # only when it is not the root filesystem's device.
    try:
        devs.discard(os.stat("/").st_dev)
    except OSError:
        pass
    return frozenset(devs)


def _under_pseudo_root(resolved: str) -> bool:
    return any(resolved == r or resolved.startswith(r + "/") for r in PSEUDO_ROOTS)


def is_pseudo_fs(path: str | os.PathLike[str], st_dev: int | None = None) -> bool:
    """True when `path` lies on /proc, /sys, /dev or another kernel pseudo-filesystem."""
    try:
        resolved = os.path.realpath(path)
    except (OSError, ValueError):
        return False
    if _under_pseudo_root(resolved):
        return True
    if st_dev is None:
        try:
            st_dev = os.stat(resolved).st_dev
        except (OSError, ValueError):
            return False
    return st_dev in pseudo_devs()


def _not_regular(path: str | os.PathLike[str], what: str) -> OSError:
    return OSError(errno.EINVAL, f"not a regular file ({what})", os.fspath(path))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "device"),
                       (stat.S_ISBLK, "device"), (stat.S_ISSOCK, "socket"), (stat.S_ISLNK, "symlink")):
        if test(mode):
            return name
    return "special file"


def stat_regular(path: str | os.PathLike[str], *, follow_symlinks: bool = False) -> os.stat_result:
    """`os.stat` of a regular file on a real filesystem; OSError for anything else."""
    st = os.stat(path, follow_symlinks=follow_symlinks)
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, _kind(st.st_mode))
    if st.st_dev in pseudo_devs():
        raise _not_regular(path, "pseudo-filesystem")
    return st


def open_regular(path: str | os.PathLike[str], *, follow_symlinks: bool = False) -> tuple[int, os.stat_result]:
    """Open a regular file for reading without ever blocking; return (fd, fstat).

    O_NONBLOCK keeps a FIFO (or a device) from hanging the open; O_NOFOLLOW refuses a
    symlink unless `follow_symlinks`; fstat then requires a regular file that is not on a
    pseudo-filesystem (/proc/kmsg is "regular" and blocks on read). OSError otherwise.
    The caller closes the descriptor.
    """
    if _under_pseudo_root(os.path.realpath(path)):  # never even open a kernel interface
        raise _not_regular(path, "pseudo-filesystem")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, _kind(st.st_mode))
        if st.st_dev in pseudo_devs():
            raise _not_regular(path, "pseudo-filesystem")
        if hasattr(os, "O_NONBLOCK"):  # regular files never block; restore normal reads
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_fd(fd: int, max_bytes: int, offset: int = 0) -> bytes:
    """At most `max_bytes` bytes of an open file from `offset`."""
    chunks: list[bytes] = []
    left = max(0, max_bytes)
    pos = offset
    while left > 0:
        chunk = os.pread(fd, min(left, 1 << 20), pos)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
        pos += len(chunk)
    return b"".join(chunks)


def read_regular(path: str | os.PathLike[str], max_bytes: int, *, offset: int = 0,
                 follow_symlinks: bool = False) -> bytes:
    """At most `max_bytes` bytes of a regular file from `offset` (see `open_regular`)."""
    fd, _ = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        return read_fd(fd, max_bytes, offset)
    finally:
        os.close(fd)


def read_bounded(path: str | os.PathLike[str], max_bytes: int, what: str = "file", *,
                 follow_symlinks: bool = True) -> bytes:
    """The whole of a regular file the user named, or InputError saying why not: missing,
    not a regular file (a FIFO, a device, a directory, /proc), unreadable, or larger than
    `max_bytes` (a bound, so `/dev/zero` or a 10 GB log cannot exhaust memory)."""
    if "\x00" in os.fspath(path):
        raise InputError(f"{what} path contains a NUL character (\\x00)")
    try:
        fd, st = open_regular(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        raise InputError(f"cannot read {what} {os.fspath(path)}: it does not exist") from None
    except OSError as e:
        raise InputError(f"cannot read {what} {os.fspath(path)}: {e.strerror or e}") from None
    try:
        if st.st_size > max_bytes:
            raise InputError(f"{what} {os.fspath(path)} is {st.st_size:,} bytes; the limit is "
                             f"{max_bytes:,}")
        data = read_fd(fd, max_bytes + 1)
    except OSError as e:
        raise InputError(f"cannot read {what} {os.fspath(path)}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew while read
        raise InputError(f"{what} {os.fspath(path)} is over the limit of {max_bytes:,} bytes")
    return data
