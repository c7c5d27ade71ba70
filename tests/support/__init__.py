"""Helpers for Odradek's integration and cluster tests.

    from tests.support import free_port, BrokerProcess, ZooKeeperProcess

See tests/conftest.py for the pytest fixtures built on these.
"""
from .broker import DEFAULT_PROPS, BrokerProcess, broker_command_available
from .net import (LOOPBACK, ApiVersionsReply, api_versions_v0, four_letter_word, free_port,
                  kafka_ready, port_open, wait_for)
from .process import ManagedProcess, ProcessStartError
from .zookeeper import ZooKeeperProcess, zookeeper_available

__all__ = [
    "LOOPBACK", "ApiVersionsReply", "BrokerProcess", "DEFAULT_PROPS", "ManagedProcess",
    "ProcessStartError", "ZooKeeperProcess", "api_versions_v0", "broker_command_available",
    "four_letter_word", "free_port", "kafka_ready", "port_open", "wait_for",
    "zookeeper_available",
]
