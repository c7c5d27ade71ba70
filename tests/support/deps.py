"""An optional test dependency that is missing: the test skips with the reason, or fails with it
under ODRADEK_STRICT_DEPS=1 (which scripts/test.sh sets, so CI never passes by skipping)."""
from __future__ import annotations

import os

import pytest


def strict_deps() -> bool:
    return os.environ.get("ODRADEK_STRICT_DEPS", "") not in ("", "0")


def missing_dependency(why: str) -> None:
    if strict_deps():
        pytest.fail(why)
    pytest.skip(why)
