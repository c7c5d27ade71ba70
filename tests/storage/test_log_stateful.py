"""Hypothesis state machine: a Log against an in-memory list of batches, through append,
roll, truncate, retention by log start, clean close/reopen and crash/reopen."""
import os
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.records import iter_batches
from storage.config import LogConfig
from storage.log import Log
from tests.storage.helpers import make_batch


def config():
    return LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=96,
                     file_delete_delay_ms=0, retention_ms=-1)


class LogMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = tempfile.mkdtemp()
        self.dir = os.path.join(self.tmp, "topic-0")
        self.log = Log(self.dir, config())
        self.model = []          # (base_offset, last_offset, payload bytes per record)
        self.leo = 0
        self.start = 0

    def teardown(self):
        if not self.log.closed:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(values=st.lists(st.binary(min_size=0, max_size=60), min_size=1, max_size=4),
          nbatches=st.integers(1, 3))
    def append(self, values, nbatches):
        buf = bytearray()
        for _ in range(nbatches):
            buf += make_batch(values)
        info = self.log.append(buf, 0)
        assert info.first_offset == self.leo
        for _ in range(nbatches):
            self.model.append((self.leo, self.leo + len(values) - 1, tuple(values)))
            self.leo += len(values)
        assert info.last_offset == self.leo - 1

    @rule()
    def roll(self):
        self.log.roll()

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def truncate(self, data):
        i = data.draw(st.integers(0, len(self.model) - 1))
        target = self.model[i][0]
        if target < self.log.segments[0].base_offset:
            return
        self.log.truncate_to(target)
        del self.model[i:]
        self.leo = target
        self.start = min(self.start, target)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete_records(self, data):
        i = data.draw(st.integers(0, len(self.model) - 1))
        self.log.update_high_watermark(self.leo)
        self.log.delete_records(self.model[i][0])
        self.log.delete_old_segments()
        self.start = max(self.start, self.model[i][0])

    @rule()
    def reopen_clean(self):
        self.log.close()
        self.log = Log(self.dir, config(), log_start_offset=self.start)

    @rule(chop=st.integers(0, 40))
    def crash_and_recover(self, chop):
        rp = self.log.recovery_point
        path = self.log.active.log_path
        self.log.close_handles()
        if chop and self.model:
            # a torn write of the last batch: only the last batch may be lost
            size = os.path.getsize(path)
            last_size = len(make_batch(self.model[-1][2]))
            cut = min(chop, last_size, size)
            if cut and self.model[-1][0] >= int(os.path.basename(path)[:20]):
                with open(path, "r+b") as f:
                    f.truncate(size - cut)
                self.leo = self.model[-1][0]
                self.model.pop()
                # a torn tail below the log start offset: the log start cannot pass the end
                self.start = min(self.start, self.leo)
        self.log = Log(self.dir, config(), recovery_point=rp, log_start_offset=self.start,
                       clean_shutdown=False)

    @invariant()
    def matches_model(self):
        log = self.log
        assert log.log_end_offset == self.leo
        assert log.log_start_offset == self.start or (
            not self.model and log.log_start_offset <= self.leo)
        got = []
        for h in iter_batches(log.read_bytes(log.log_start_offset, 10 ** 7)) \
                if log.log_start_offset < self.leo else []:
            got.append((h.base_offset, h.last_offset))
        pos = log.log_start_offset
        while pos < self.leo:
            data = log.read_bytes(pos, 10 ** 7)
            hs = list(iter_batches(data))
            assert hs, f"nothing readable at {pos}"
            got.extend((h.base_offset, h.last_offset) for h in hs)
            pos = hs[-1].last_offset + 1
        want = [(b, l) for b, l, _ in self.model if l >= self.log.log_start_offset]
        assert sorted(set(got)) == want
        assert log.bases == sorted(log.bases)


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
