"""Scraping a broker's Prometheus endpoint in tests."""
from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str) -> dict[tuple, float]:
    """{(sample name, ((label, value), ...)): value} of one scrape."""
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def val(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def expose(brokers) -> dict:
    """Give each broker of ``brokers`` (id -> BrokerProcess, not started yet) a Prometheus
    endpoint on a free loopback port; returns id -> port."""
    from tests.support.net import free_port
    ports = {}
    for i, b in brokers.items():
        ports[i] = free_port()
        b.props["odradek.metrics.prometheus.port"] = str(ports[i])
        b.props["odradek.metrics.prometheus.host"] = "127.0.0.1"
    return ports
