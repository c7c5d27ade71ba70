"""Quota callbacks loaded by the broker process of tests/integration/test_quota_callback.py
(``client.quota.callback.class``, broker/quota_callback.py).  They write what the broker asked
them, one JSON object per line, to the file named by ``odradek.test.quota.record``."""
from __future__ import annotations

import json
import threading


class TeamQuotas:
    """Clients share one rate per team, the part of their client id before the first '-'.

    A team's limit of a quota type comes from the broker setting
    ``odradek.test.quota.limit.<TYPE>.<team>``, or from a quota set with the usual tools on the
    client id that is the team's name (``--entity-type clients --entity-name <team>``), which
    wins.  Teams without either are not limited."""

    def __init__(self):
        self._lock = threading.Lock()
        self.record = None
        self.static: dict[tuple[str, str], float] = {}
        self.dynamic: dict[tuple[str, str], float] = {}
        self._tagged: set = set()
        self.broker_id = None

    def _write(self, kind: str, **fields) -> None:
        if self.record is None:
            return
        with self._lock, open(self.record, "a") as f:      # one line per write: brokers may share the file
            f.write(json.dumps({"kind": kind, "broker": self.broker_id, **fields}) + "\n")

    def configure(self, configs):
        self.record = configs.get("odradek.test.quota.record")
        self.broker_id = int(configs["broker.id"]) if "broker.id" in configs else None
        prefix = "odradek.test.quota.limit."
        for k, v in configs.items():
            if k.startswith(prefix):
                qtype, _, team = k[len(prefix):].partition(".")
                self.static[(qtype, team)] = float(v)
        self._write("configure", limits={f"{t}.{n}": v for (t, n), v in self.static.items()})

    def quota_metric_tags(self, quota_type, principal, client_id):
        team = client_id.split("-", 1)[0]
        key = (quota_type, principal.principal_type, principal.name, client_id)
        if key not in self._tagged:            # once per client, not per request
            self._tagged.add(key)
            self._write("tags", quota_type=quota_type, principal_type=principal.principal_type,
                        principal=principal.name, client_id=client_id)
        return {"team": team}

    def quota_limit(self, quota_type, metric_tags):
        team = metric_tags["team"]
        limit = self.dynamic.get((quota_type, team), self.static.get((quota_type, team)))
        self._write("limit", quota_type=quota_type, tags=metric_tags, limit=limit)
        return limit

    def update_quota(self, quota_type, entity, value):
        parts = [(e.entity_type, e.name) for e in entity.config_entities]
        self._write("update", quota_type=quota_type, entity=parts, value=value)
        if len(parts) == 1 and parts[0][0] == "CLIENT_ID":
            self.dynamic[(quota_type, parts[0][1])] = value

    def remove_quota(self, quota_type, entity):
        parts = [(e.entity_type, e.name) for e in entity.config_entities]
        self._write("remove", quota_type=quota_type, entity=parts)
        if len(parts) == 1 and parts[0][0] == "CLIENT_ID":
            self.dynamic.pop((quota_type, parts[0][1]), None)

    def quota_reset_required(self, quota_type):
        return False

    def update_cluster_metadata(self, cluster):
        self._write("cluster", broker_id=cluster.broker_id, cluster_id=cluster.cluster_id,
                    brokers=[b.id for b in cluster.brokers],
                    leaders={f"{name}-{p}": st.leader for name, info in cluster.topics.items()
                             for p, st in info.partitions.items()})
        return False

    def close(self):
        self._write("close")


class NoLimit:
    """Lacks quota_limit: the broker refuses to start with it."""

    def quota_metric_tags(self, quota_type, principal, client_id):
        return {}
