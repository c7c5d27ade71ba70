"""Kafka's text checkpoint files.

Format (UTF-8, ``\\n`` line ends)::

    0                 version, always 0
    N                 number of entries
    <entry 1>         fields separated by a space
    ...

Used for ``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint`` (entries ``topic partition offset``)
and ``leader-epoch-checkpoint`` (entries ``epoch start_offset``).  Writes go to ``<file>.tmp``,
are fsynced, then renamed over the original and the directory is fsynced.  Readers reject a
version other than 0 and an entry count that does not match; an empty file means no entries.
"""
from __future__ import annotations

import os

VERSION = 0


class CheckpointError(ValueError):
    pass


def write_checkpoint(path: str, entries, fsync: bool = True) -> None:
    """Atomically replace ``path`` with ``entries`` (an iterable of tuples)."""
    lines = [str(VERSION)]
    body = [" ".join(str(f) for f in e) for e in entries]
    lines.append(str(len(body)))
    lines.extend(body)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    write_atomic(path, data, fsync)


def write_atomic(path: str, data: bytes, fsync: bool = True) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(path) or ".")


def fsync_dir(path: str) -> None:
    try:
        dfd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def read_file(path: str) -> bytes:
    """The whole of a small file with plain ``os`` calls: open, read, close.  Start-up reads a
    handful of small files per partition (checkpoints, indexes, snapshots), and Python's
    buffered ``open`` adds five system calls and an object stack to each (docs/storage.md,
    "Loading logs").  Raises FileNotFoundError like ``open``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, 65536)
        if len(data) < 65536:
            return data
        chunks = [data]
        while True:
            data = os.read(fd, 1 << 20)
            if not data:
                return b"".join(chunks)
            chunks.append(data)
    finally:
        os.close(fd)


def read_checkpoint(path: str, fields: int) -> list[list[str]]:
    """Entries as lists of strings with ``fields`` items each; [] if the file is absent/empty."""
    try:
        text = read_file(path).decode("utf-8")
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    if not lines or all(not ln.strip() for ln in lines):
        return []
    try:
        version = int(lines[0].strip())
    except ValueError:
        raise CheckpointError(f"{path}: malformed version line {lines[0]!r}") from None
    if version != VERSION:
        raise CheckpointError(f"{path}: unrecognised checkpoint version {version}")
    if len(lines) < 2:
        raise CheckpointError(f"{path}: missing entry count")
    try:
        count = int(lines[1].strip())
    except ValueError:
        raise CheckpointError(f"{path}: malformed entry count {lines[1]!r}") from None
    body = [ln.split() for ln in lines[2:] if ln.strip()]
    if count != len(body):
        raise CheckpointError(f"{path}: expected {count} entries, found {len(body)}")
    for parts in body:
        if len(parts) != fields:
            raise CheckpointError(f"{path}: malformed entry {' '.join(parts)!r}")
    return body


def read_offsets_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` from a root offset checkpoint."""
    out = {}
    for topic, part, off in read_checkpoint(path, 3):
        try:
            out[(topic, int(part))] = int(off)
        except ValueError:
            raise CheckpointError(f"{path}: malformed entry {topic} {part} {off}") from None
    return out


def write_offsets_checkpoint(path: str, offsets: dict, fsync: bool = True) -> None:
    write_checkpoint(path, ((t, p, o) for (t, p), o in sorted(offsets.items())), fsync)
