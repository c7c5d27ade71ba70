"""Size-prefixed frames: ``int32 size`` + that many bytes.

``FrameReader`` is sans-io and has two faces:

* ``feed(data) -> list[frame]`` for callers that receive bytes objects;
* ``get_buffer()`` / ``buffer_updated(n)`` for ``asyncio.BufferedProtocol``: once a frame's size
  is known the reader allocates exactly that many bytes and hands out a writable view into it, so
  the kernel copies the frame once, straight into its final buffer.

A declared size above ``max_size`` raises ``FrameTooLarge`` before anything is allocated; a
negative size raises ``InvalidFrame``.
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


class FrameReader:
    """Split a byte stream into frames (memoryviews over exactly-sized bytearrays)."""

    SMALL = 64 * 1024   # receive buffer used while between frames

    def __init__(self, max_size: int = 104857600):
        self.max_size = max_size
        self._head = bytearray(4)
        self._head_have = 0
        self._body = None          # bytearray of the current frame
        self._body_have = 0
        self._scratch = bytearray(self.SMALL)
        self._frames: list = []

    # -- BufferedProtocol face -------------------------------------------------------------
    def get_buffer(self, sizehint: int = -1):
        if self._body is not None:
            return memoryview(self._body)[self._body_have:]
        return memoryview(self._scratch)

    def buffer_updated(self, nbytes: int) -> list:
        """Account for ``nbytes`` written into the last ``get_buffer()``; returns whole frames."""
        if self._body is not None:
            self._body_have += nbytes
            if self._body_have == len(self._body):
                self._frames.append(memoryview(self._body))
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
                self._body = bytearray(size)
                self._body_have = 0
                if size == 0:
                    self._frames.append(memoryview(self._body))
                    self._body = None
                    continue
            take = min(len(self._body) - self._body_have, n - pos)
            self._body[self._body_have:self._body_have + take] = mv[pos:pos + take]
            self._body_have += take
            pos += take
            if self._body_have == len(self._body):
                self._frames.append(memoryview(self._body))
                self._body = None

    @property
    def pending(self) -> int:
        """Bytes of a partial frame held (header included)."""
        return self._head_have + (self._body_have if self._body is not None else 0)
