"""A Quix Streams application with exactly-once processing, run by
tests/integration/test_quixstreams.py in tests/quix/.venv.

usage: app.py BOOTSTRAP INPUT PREFIX GROUP STATE_DIR INSTANCE_ID

From INPUT (JSON {"id": i, "user": "u<n>"}, keyed k<n>) it writes
  PREFIX-counts: the record's running count for its key, kept in State (a changelog topic)
  PREFIX-users:  after group_by("user") (a repartition topic), the running count for its user
The transactional id and the group instance id are fixed, so a restarted run fences the one it
replaces and rejoins the group without waiting for a session timeout.
"""
import sys

from quixstreams import Application
from quixstreams.models import TopicConfig

boot, source, prefix, group, state_dir, instance = sys.argv[1:7]
app = Application(broker_address=boot, consumer_group=group, auto_offset_reset="earliest",
                  processing_guarantee="exactly-once", state_dir=state_dir, commit_interval=0.5,
                  consumer_extra_config={"group.instance.id": instance},
                  producer_extra_config={"transactional.id": f"{group}-{instance}"})
out = TopicConfig(num_partitions=3, replication_factor=1)
counts = app.topic(prefix + "-counts", value_serializer="json", config=out)
users = app.topic(prefix + "-users", value_serializer="json", config=out)
sdf = app.dataframe(app.topic(source, value_deserializer="json"))


def counter(field):
    def count(value, key, timestamp, headers, state):
        n = state.get("count", 0) + 1
        state.set("count", n)
        return {"id": value["id"], field: key.decode() if isinstance(key, bytes) else key, "count": n}
    return count


sdf.apply(counter("key"), stateful=True, metadata=True).to_topic(counts)
sdf.group_by("user").apply(counter("user"), stateful=True, metadata=True).to_topic(users)
app.run()
