"""Create-topic and alter-config policies for tests/integration/test_policies.py
(``create.topic.policy.class.name``, ``alter.config.policy.class.name``).  Each records the
requests it sees, as JSON lines, in the file named by the broker setting
``odradek.test.policy.record``."""
from __future__ import annotations

import dataclasses
import json

from broker.policy import PolicyViolation


class _Recording:
    def configure(self, configs):
        self.record = configs["odradek.test.policy.record"]

    def _write(self, kind, request):
        with open(self.record, "a") as f:
            f.write(json.dumps({"kind": kind, **dataclasses.asdict(request)}) + "\n")


class TopicRules(_Recording):
    """No topic named forbidden-*, at most five partitions; a topic named boom-* makes the policy
    itself fail."""

    def validate(self, request):
        self._write("create", request)
        if request.topic.startswith("boom-"):
            raise RuntimeError("the policy broke")
        if request.topic.startswith("forbidden-"):
            raise PolicyViolation(f"Topic {request.topic} is forbidden here.")
        if request.num_partitions is not None and request.num_partitions > 5:
            raise PolicyViolation("At most 5 partitions, not %d." % request.num_partitions)


class PolicyViolationException(Exception):
    """A policy may raise its own exception class of Kafka's name."""


class ConfigRules(_Recording):
    """retention.ms at least 1000 on topics; log.cleaner.threads never changed on brokers."""

    def validate(self, request):
        self._write("alter", request)
        value = request.configs.get("retention.ms")
        if request.resource_type == "TOPIC" and value is not None and int(value) < 1000:
            raise PolicyViolationException(f"retention.ms must be at least 1000, not {value}.")
        if request.resource_type == "BROKER" and "log.cleaner.threads" in request.configs:
            raise PolicyViolation("log.cleaner.threads is fixed.")
