"""Size-prefixed frames: ``int32 size`` + that many bytes.

``FrameReader`` is sans-io and has two faces:

* ``feed(data) -> list[frame]`` for callers that receive bytes objects;
* ``get_buffer()`` / ``buffer_updated(n)`` for ``asyncio.BufferedProtocol``: once a frame's size
  is known the reader allocates exactly that many bytes and hands out a writable view into it, so
  the kernel copies the frame once, straight into its final buffer.

A declared size above ``max_size`` raises ``FrameTooLarge`` before anything is allocated; a
negative size raises ``InvalidFrame``.

A ``FramePool`` shared by the readers lends large frames (produce requests, mostly) a buffer that
an earlier frame used and that nothing refers to any more, instead of a new one: Python zero-fills
every new ``bytearray``, and that memset of each produce request's megabyte was 6-7 % of the
broker's CPU per GB produced (perf, docs/broker.md "Frame buffers").
"""
from __future__ import annotations

import struct

from protocol.primitives import DecodeError

_SIZE = struct.Struct(">i")


class InvalidFrame(DecodeError):
    pass


class FrameTooLarge(InvalidFrame):
    def __init__(self, size, limit):
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


def frame(payload) -> bytes:
    """Prefix ``payload`` with its size."""
    return _SIZE.pack(len(payload)) + bytes(payload)


def _released(buf: bytearray) -> bool:
    """True when no memoryview (nor any other buffer export) of ``buf`` is alive.  A bytearray
    with exports refuses to change size, so removing and putting back its last byte asks exactly
    that; both steps stay within its allocation (no copy, no move)."""
    try:
        last = buf.pop()
    except BufferError:
        return False
    buf.append(last)
    return True


class FramePool:
    """Buffers of large frames, lent again once released.

    ``take(size)`` returns a writable memoryview of exactly ``size`` bytes, over a buffer that no
    earlier frame refers to any more when one fits (its old contents are overwritten before the
    frame is handed out: the reader fills it from the socket), else over a new one that joins the
    pool.  Whether a buffer is released is asked of the buffer itself (``_released``), so a frame
    whose records a handler still holds, a parked acks=all produce for example, is never written
    over.  At most ``max_buffers`` buffers of at most ``max_size`` bytes each are kept: the pool
    holds at most 32 MiB however many connections share it.
    """

    def __init__(self, max_buffers: int = 16, max_size: int = 2 * 1024 * 1024):
        self.max_buffers = max_buffers
        self.max_size = max_size
        self._buffers: list = []
        self._next = 0          # the slot a new buffer takes once the pool is full
        self.reused = 0         # frames given a released buffer (tests and curiosity)

    def take(self, size: int):
        if size > self.max_size:
            return memoryview(bytearray(size))
        for buf in self._buffers:
            if len(buf) >= size and _released(buf):
                self.reused += 1
                return memoryview(buf)[:size]
        buf = bytearray(size)
        if len(self._buffers) < self.max_buffers:
            self._buffers.append(buf)
        else:
            # full: the new buffer replaces the oldest; a replaced buffer still lent out lives on
            # with its frame and is freed with it
            self._buffers[self._next] = buf
            self._next = (self._next + 1) % self.max_buffers
        return memoryview(buf)


class FrameReader:
    """Split a byte stream into frames (memoryviews of exactly the frame's size)."""

    SMALL = 64 * 1024   # receive buffer used while between frames

    def __init__(self, max_size: int = 104857600, pool: FramePool | None = None):
        self.max_size = max_size
        self._pool = pool       # lends buffers to frames larger than SMALL
        self._head = bytearray(4)
        self._head_have = 0
        self._body = None          # writable memoryview of the current frame
        self._body_have = 0
        self._scratch = bytearray(self.SMALL)
        self._frames: list = []

    # -- BufferedProtocol face -------------------------------------------------------------
    def get_buffer(self, sizehint: int = -1):
        if self._body is not None:
            return self._body[self._body_have:]
        return memoryview(self._scratch)

    def buffer_updated(self, nbytes: int) -> list:
        """Account for ``nbytes`` written into the last ``get_buffer()``; returns whole frames."""
        if self._body is not None:
            self._body_have += nbytes
            if self._body_have == len(self._body):
                self._frames.append(self._body)
                self._body = None
        else:
            self._consume(memoryview(self._scratch)[:nbytes])
        frames, self._frames = self._frames, []
        return frames

    # -- plain face ------------------------------------------------------------------------
    def feed(self, data) -> list:
        self._consume(memoryview(data))
        frames, self._frames = self._frames, []
        return frames

    def _consume(self, mv):
        pos = 0
        n = len(mv)
        while pos < n:
            if self._body is None:
                take = min(4 - self._head_have, n - pos)
                self._head[self._head_have:self._head_have + take] = mv[pos:pos + take]
                self._head_have += take
                pos += take
                if self._head_have < 4:
                    return
                size = _SIZE.unpack(self._head)[0]
                self._head_have = 0
                if size < 0:
                    raise InvalidFrame(f"negative frame size {size}")
                if size > self.max_size:
                    raise FrameTooLarge(size, self.max_size)
                if self._pool is not None and size > self.SMALL:
                    self._body = self._pool.take(size)
                else:
                    self._body = memoryview(bytearray(size))
                self._body_have = 0
                if size == 0:
                    self._frames.append(self._body)
                    self._body = None
                    continue
            take = min(len(self._body) - self._body_have, n - pos)
            self._body[self._body_have:self._body_have + take] = mv[pos:pos + take]
            self._body_have += take
            pos += take
            if self._body_have == len(self._body):
                self._frames.append(self._body)
                self._body = None

    @property
    def pending(self) -> int:
        """Bytes of a partial frame held (header included)."""
        return self._head_have + (self._body_have if self._body is not None else 0)
