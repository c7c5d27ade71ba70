"""A replica's log moving to another log dir (AlterReplicaLogDirs): the future log, its copy,
the swap, and every state a crash can leave on disk."""
import asyncio
import os

import pytest

from broker.log_dir_mover import LogDirMover, copy_some, first_batch_base
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager
from tests.storage.helpers import make_batch, make_marker

TP = ("moving", 0)


def cfg(**kw):
    return LogConfig(segment_bytes=kw.pop("segment_bytes", 4096), **kw)


def manager(tmp_path, clock):
    return LogManager([str(tmp_path / "a"), str(tmp_path / "b")], cfg(), broker_id=1,
                      cluster_id="c", time_ms=clock)


def fill(lg, n=40, epoch_every=10):
    """Batches over several segments and leader epochs, and an aborted transaction."""
    for i in range(n):
        epoch = i // epoch_every
        lg.assign_leader_epoch(epoch)
        lg.append(make_batch([b"v%d-%d" % (i, j) for j in range(3)], keys=[b"k%d" % i] * 3), epoch)
    lg.append(make_batch([b"t1", b"t2"], producer_id=7, producer_epoch=0, base_sequence=0,
                         transactional=True), 9)
    lg.append(make_marker(7, 0, commit=False), 9, origin="coordinator")
    lg.append(make_batch([b"after"]), 9)


def everything(lg) -> bytes:
    return lg.read_bytes(lg.log_start_offset, 1 << 30)


def state(lg):
    return (lg.log_start_offset, lg.log_end_offset, list(lg.epoch_cache.entries),
            lg.aborted_transactions(0, lg.log_end_offset),
            {pid: (e.producer_epoch, e.last_seq) for pid, e in lg.producer_state.producers.items()})


def move(lm, tp=TP, dest=None):
    cur = lm.logs[tp]
    dest = dest or next(d for d in lm.log_dirs if d != lm.log_dir_of[tp])
    fut = lm.create_future_log(tp, dest, first_batch_base(cur))
    while copy_some(cur, fut, 1000):
        pass
    return fut


def test_move_copies_everything_and_swaps(tmp_path, clock):
    lm = manager(tmp_path, clock)
    cur = lm.get_or_create_log(*TP, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    fill(cur)
    cur.update_high_watermark(cur.log_end_offset)
    cur.delete_records(5)           # the start falls inside a batch: the copy begins with it
    before, data = state(cur), everything(cur)
    src = lm.log_dir_of[TP]
    fut = move(lm)
    assert os.path.basename(fut.dir).endswith("-future") and fut.is_future
    assert lm.future_dir_sizes()[lm.future_dir_of[TP]][TP] == (fut.size(), 0)
    new = lm.replace_current_with_future(TP, cur.log_start_offset, cur.high_watermark)
    assert lm.logs[TP] is new and lm.log_dir_of[TP] != src and not new.is_future
    assert state(new) == before and everything(new) == data
    assert new.topic_id == "AAAAAAAAAAAAAAAAAAAAAA"
    assert [n for n in os.listdir(src) if n.endswith("-delete")]     # the old copy, to be removed
    with pytest.raises(Exception):
        cur.append(make_batch([b"late"]), 9)                       # the replaced log takes nothing
    # its files stay open for file.delete.delay.ms: regions handed out before still read
    assert lm.close_retired_logs(clock.now) == 0
    assert lm.close_retired_logs(clock.now + cur.config.file_delete_delay_ms) == 1
    new.append(make_batch([b"more"]), 9)
    data = everything(new)
    lm.shutdown()
    lm = manager(tmp_path, clock)
    assert lm.log_dir_of[TP] != src and everything(lm.logs[TP]) == data and not lm.future_logs


def test_a_stop_during_the_copy_keeps_both_and_the_copy_goes_on(tmp_path, clock):
    lm = manager(tmp_path, clock)
    cur = lm.get_or_create_log(*TP)
    fill(cur)
    fut = lm.create_future_log(TP, str(tmp_path / "b"), first_batch_base(cur))
    copy_some(cur, fut, 1000)
    partial = fut.log_end_offset
    assert 0 < partial < cur.log_end_offset
    data = everything(cur)
    lm.close_without_checkpoint()           # kill -9
    lm = manager(tmp_path, clock)
    assert lm.log_dir_of[TP] == str(tmp_path / "a") and everything(lm.logs[TP]) == data
    assert lm.future_logs[TP].log_end_offset == partial
    move_on = lm.future_logs[TP]
    while copy_some(lm.logs[TP], move_on):
        pass
    new = lm.replace_current_with_future(TP, lm.logs[TP].log_start_offset, lm.logs[TP].high_watermark)
    assert everything(new) == data


def test_a_future_log_found_alone_is_the_partition(tmp_path, clock):
    """Stopped between the swap's renames: the current copy is already "-delete"."""
    lm = manager(tmp_path, clock)
    cur = lm.get_or_create_log(*TP)
    fill(cur)
    data, before = everything(cur), state(cur)
    fut = move(lm)
    fut.flush()
    cur.close()
    os.rename(cur.dir, cur.dir + ".0123456789abcdef0123456789abcdef-delete")
    lm.close_without_checkpoint()
    lm = manager(tmp_path, clock)
    assert lm.log_dir_of[TP] == str(tmp_path / "b") and not lm.future_logs
    assert everything(lm.logs[TP]) == data and state(lm.logs[TP])[1:] == before[1:]
    assert not [n for n in os.listdir(tmp_path / "a") if n.endswith("-delete")]


def test_a_partition_found_twice_keeps_the_longer_copy(tmp_path, clock):
    """Both renames of a swap reached one disk but not the other: two current copies."""
    for longer in ("a", "b"):
        root = tmp_path / longer
        for d in ("a", "b"):
            lg = Log(str(root / d / "moving-0"), cfg(), time_ms=clock)
            for i in range(5 if d == longer else 3):
                lg.append(make_batch([b"x%d" % i]), 0)
            lg.close()
        lm = LogManager([str(root / "a"), str(root / "b")], cfg(), broker_id=1, cluster_id="c",
                        time_ms=clock)
        assert lm.log_dir_of[TP] == str(root / longer) and lm.logs[TP].log_end_offset == 5
        other = "b" if longer == "a" else "a"
        assert not os.path.exists(root / other / "moving-0")
        lm.shutdown()


def test_deleting_the_log_drops_its_future(tmp_path, clock):
    lm = manager(tmp_path, clock)
    cur = lm.get_or_create_log(*TP)
    fill(cur, n=5)
    move(lm)
    lm.delete_log(*TP)
    assert TP not in lm.future_logs
    lm.remove_deleted_dirs()
    assert os.listdir(tmp_path / "b") == [n for n in os.listdir(tmp_path / "b") if not n.startswith("moving")]


def test_preferred_dir_for_a_log_not_created_yet(tmp_path, clock):
    lm = manager(tmp_path, clock)
    lm.preferred_dir[TP] = str(tmp_path / "b")
    lm.get_or_create_log(*TP)
    assert lm.log_dir_of[TP] == str(tmp_path / "b") and TP not in lm.preferred_dir


class _Part:
    def __init__(self, lg):
        self.log = lg
        self.woken = 0

    def wake(self):
        self.woken += 1


class _Replicas:
    def __init__(self, parts):
        self.parts = parts
        self.removals = 0

    def get(self, topic, partition):
        return self.parts.get((topic, partition))

    def schedule_dir_removal(self):
        self.removals += 1


class _Metadata:
    """The topics the broker's metadata knows: TP's topic, and "known" (partition 0), which this
    broker does not host."""
    def topic(self, name):
        from types import SimpleNamespace
        return SimpleNamespace(partitions={0: None}) if name in (TP[0], "known") else None


class _Broker:
    def __init__(self, lm):
        self.log_manager = lm
        self.config = {}        # no replica.alter.log.dirs.io.max.bytes.per.second: unpaced
        self.replicas = _Replicas({TP: _Part(lm.logs[TP])})
        self.controller = _Metadata()


@pytest.mark.parametrize("meanwhile", ["appends", "truncation", "start offset past the copy"])
def test_the_mover_follows_the_current_log(tmp_path, clock, meanwhile, monkeypatch):
    """The copy task, with appends, a follower's truncation or a log start offset moving past
    the copy happening between its steps: the swapped-in log is the current log as it is."""
    import broker.log_dir_mover
    monkeypatch.setattr(broker.log_dir_mover, "CHUNK", 300)     # a batch or two per step
    lm = manager(tmp_path, clock)
    cur = lm.get_or_create_log(*TP)
    fill(cur, n=30)
    broker = _Broker(lm)
    mover = LogDirMover(broker)

    async def run():
        assert mover.alter(*TP, str(tmp_path / "b")) == 0
        steps = 0
        while mover.tasks:
            steps += 1
            if steps == 2:
                cur.assign_leader_epoch(12)     # a new leader epoch, no batch of it yet
            if steps == 3:
                if meanwhile == "appends":
                    cur.append(make_batch([b"new"] * 50), 12)
                elif meanwhile == "truncation":
                    cur.truncate_to(cur.log_end_offset - 20)
                    cur.append(make_batch([b"diverged"] * 2), 12)
                else:
                    cur.update_high_watermark(cur.log_end_offset)
                    cur.delete_records(cur.log_end_offset - 2)
                    cur.delete_old_segments()
            await asyncio.sleep(0)
        return steps

    assert asyncio.run(run()) > 10
    new = lm.logs[TP]
    assert new is not cur and broker.replicas.parts[TP].log is new and mover.completed == 1
    assert new.log_end_offset == cur.log_end_offset and new.log_start_offset == cur.log_start_offset
    assert everything(new) == everything(cur) and state(new) == state(cur)
    assert broker.replicas.removals == 1


def test_alter_answers(tmp_path, clock):
    lm = manager(tmp_path, clock)
    cur = lm.get_or_create_log(*TP)
    fill(cur, n=3)
    mover = LogDirMover(_Broker(lm))
    here, there = str(tmp_path / "a"), str(tmp_path / "b")
    assert mover.alter(*TP, str(tmp_path / "elsewhere")) == 57          # LOG_DIR_NOT_FOUND
    assert mover.alter(*TP, there + "/") == 57                         # compared as given
    assert mover.alter(*TP, here) == 0 and not lm.future_logs           # already there
    assert mover.alter("known", 0, there) == 9                         # REPLICA_NOT_AVAILABLE: not hosted yet
    assert lm.preferred_dir[("known", 0)] == there
    assert mover.alter("unknown", 0, there) == 3                       # UNKNOWN_TOPIC_OR_PARTITION, as Kafka
    assert mover.alter("known", 1, there) == 3
    assert mover.alter("x" * 249, 0, there) == 17                      # INVALID_TOPIC_EXCEPTION
    lm.offline_dirs.add(there)
    assert mover.alter(*TP, there) == 56                               # KAFKA_STORAGE_ERROR


def test_a_deleted_log_keeps_its_files_open_for_the_delete_delay(tmp_path, clock):
    """Regions handed out before a topic's deletion hold the segment's descriptor: it stays
    open (and cannot be reused for another file) until file.delete.delay.ms has passed."""
    lm = manager(tmp_path, clock)
    lg = lm.get_or_create_log(*TP)
    fill(lg, n=5)
    region = lg.read(0, 1 << 20).regions[0]
    data = region.read()
    path = lm.delete_log(*TP)
    assert path.endswith("-delete") and TP not in lm.logs
    with pytest.raises(Exception):
        lg.append(make_batch([b"late"]), 9)
    lm.remove_deleted_dirs()                    # the files are unlinked, the descriptor lives
    assert region.read() == data
    assert lm.close_retired_logs(clock.now + lg.config.file_delete_delay_ms - 1) == 0
    assert lm.close_retired_logs(clock.now + lg.config.file_delete_delay_ms) == 1
    with pytest.raises(OSError):
        os.fstat(region.fd)
