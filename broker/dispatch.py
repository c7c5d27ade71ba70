"""API key -> handler registry; ApiVersions is computed from it.

Handlers are plain coroutines ``async def handle(ctx, request) -> response | None`` registered
with ``@handler(api_key, min_version, max_version)``.  The advertised range of an API is exactly
the registered one (intersected with the specs' valid versions), so ApiVersions never promises
more than the broker serves.  Returning ``None`` sends no response (acks=0 Produce).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from protocol.messages import REQUESTS


@dataclass(frozen=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    fn: Callable[..., Awaitable[Any]]

    @property
    def name(self) -> str:
        return REQUESTS[self.api_key].__name__[:-len("Request")]


HANDLERS: dict[int, Handler] = {}

#: APIs a Kafka 3.9 broker has only in KRaft mode (DescribeQuorum): outside KRaft mode
#: (``process.roles`` unset) ApiVersions leaves them out and a request for one closes the
#: connection, as for an API the broker does not have (broker/connection.py).
KRAFT_ONLY_APIS = frozenset({55})

#: The share group APIs (KIP-932), which a Kafka broker has only without ZooKeeper: a broker of a
#: ZooKeeper cluster leaves them out of ApiVersions and closes the connection on one.
NOT_IN_ZOOKEEPER_APIS = frozenset({76, 77, 78, 79, 90, 91, 92})


def handler(api_key: int, min_version: int, max_version: int):
    lo, hi = REQUESTS[api_key].DEF.valid_versions
    if min_version < lo or max_version > hi:
        raise ValueError(f"API {api_key}: {min_version}-{max_version} outside spec {lo}-{hi}")

    def register(fn):
        if api_key in HANDLERS:
            raise ValueError(f"API {api_key} registered twice")
        HANDLERS[api_key] = Handler(api_key, min_version, max_version, fn)
        return fn
    return register


def supported_versions() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every registered API, sorted by key."""
    return [(h.api_key, h.min_version, h.max_version) for _, h in sorted(HANDLERS.items())]


def load_handlers() -> None:
    """Import every handler module so its registrations run."""
    import importlib
    import pkgutil

    import broker.handlers as pkg
    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"broker.handlers.{mod.name}")
