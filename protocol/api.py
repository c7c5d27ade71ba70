"""Request and response frames: header versions plus bodies.

A *frame* here is the bytes after the 4-byte size prefix.

* Request header v2 when the API version is flexible, else v1; ControlledShutdown v0 uses v0.
* Response header v1 when flexible, else v0; ApiVersions responses always use v0 (KIP-511).
"""
from __future__ import annotations

import struct

from protocol.messages import REQUESTS, RESPONSES, RequestHeader, ResponseHeader
from protocol.primitives import DecodeError

API_VERSIONS = 18
CONTROLLED_SHUTDOWN = 7
_KEY_VERSION = struct.Struct(">hh")


class UnknownApiError(DecodeError):
    """An API key or version the specs do not define (Kafka closes such connections)."""

    def __init__(self, api_key, api_version, message):
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if REQUESTS[api_key].DEF.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS:
        return 0
    return 1 if RESPONSES[api_key].DEF.is_flexible(api_version) else 0


def peek_request(frame) -> tuple[int, int]:
    """(api_key, api_version) of a request frame, without decoding anything else."""
    if len(frame) < 4:
        raise DecodeError("request frame shorter than its header")
    return _KEY_VERSION.unpack_from(frame, 0)


def decode_request_header(frame):
    """Decode only the header; returns (header, body_offset).  Unknown keys/versions raise."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    api_key, api_version = peek_request(buf)
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise UnknownApiError(api_key, api_version, f"unknown API key {api_key}")
    lo, hi = cls.DEF.valid_versions
    if not lo <= api_version <= hi:
        # The header layout still follows the newest version's flexibility rules.
        hv = request_header_version(api_key, hi if api_version > hi else lo)
        header, pos = RequestHeader.decode_from(buf, 0, hv)
        err = UnknownApiError(api_key, api_version,
                              f"{cls.__name__} version {api_version} is not in {lo}-{hi}")
        err.header = header
        raise err
    hv = request_header_version(api_key, api_version)
    return RequestHeader.decode_from(buf, 0, hv)


def decode_request(frame, strict: bool = True):
    """(header, body) of a request frame.  ``strict`` refuses trailing bytes."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    header, pos = decode_request_header(buf)
    cls = REQUESTS[header.request_api_key]
    body, end = cls.decode_from(buf, pos, header.request_api_version)
    if strict and end != len(buf):
        raise DecodeError(f"{len(buf) - end} trailing bytes after {cls.__name__}")
    return header, body


def encode_request(header, body) -> bytes:
    out = bytearray()
    hv = request_header_version(header.request_api_key, header.request_api_version)
    header.encode_into(out, hv)
    body.encode_into(out, header.request_api_version)
    return bytes(out)


def make_request_header(api_key, api_version, correlation_id, client_id="odradek"):
    return RequestHeader(request_api_key=api_key, request_api_version=api_version,
                         correlation_id=correlation_id, client_id=client_id)


def decode_response(frame, api_key: int, api_version: int, strict: bool = True):
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    header, pos = ResponseHeader.decode_from(buf, 0, response_header_version(api_key, api_version))
    cls = RESPONSES[api_key]
    body, end = cls.decode_from(buf, pos, api_version)
    if strict and end != len(buf):
        raise DecodeError(f"{len(buf) - end} trailing bytes after {cls.__name__}")
    return header, body


def encode_response(header, body, api_key: int, api_version: int) -> bytes:
    out = bytearray()
    encode_response_into(out, header, body, api_key, api_version)
    return bytes(out)


def encode_response_into(out, header, body, api_key, api_version, regions=None):
    """Append header+body to ``out``; file regions (for sendfile) are collected in ``regions``."""
    if isinstance(header, int):
        header = ResponseHeader(correlation_id=header)
    header.encode_into(out, response_header_version(api_key, api_version))
    body.encode_into(out, api_version, regions)
