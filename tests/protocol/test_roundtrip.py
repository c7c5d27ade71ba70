"""Every (API key, version, request|response) in the specs round-trips through the codec."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from protocol.messages import ALL, REQUESTS, RESPONSES
from tests.protocol.strategies import message_strategy

CASES = []
for _name, _cls in sorted(ALL.items()):
    _lo, _hi = _cls.DEF.valid_versions
    for _v in range(_lo, _hi + 1):
        CASES.append(pytest.param(_cls, _v, id=f"{_name}-v{_v}"))


def test_every_api_key_has_request_and_response():
    # 0-87 from the 3.9 specs; 88-89 (streams groups) and 90-92 (the share group admin APIs) from
    # generate.SPEC_NEW
    assert sorted(REQUESTS) == list(range(93))
    assert sorted(RESPONSES) == list(range(93))


@pytest.mark.parametrize("cls,version", CASES)
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_roundtrip(cls, version, data):
    msg = data.draw(message_strategy(cls, version))
    encoded = msg.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == msg
    assert decoded.encode(version) == encoded
