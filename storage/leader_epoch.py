"""Leader epoch cache backed by ``leader-epoch-checkpoint``.

How this works: an ordered list of (epoch, start_offset) — the first offset written under each
leader epoch — strictly increasing in both fields.  ``assign`` is called for every appended
batch (leader or follower) with the batch's partitionLeaderEpoch and base offset and adds an
entry only for a new, higher epoch.  ``truncate_from_end`` follows log truncation,
``truncate_from_start`` follows log-start-offset moves.  Every change rewrites the checkpoint
file (small; atomic .tmp + rename).  ``end_offset_for`` answers OffsetForLeaderEpoch with
Kafka's rules.  Not thread-safe; owned by one Log.
"""
from __future__ import annotations

from bisect import bisect_right

from .checkpoint import CheckpointError, read_checkpoint, write_checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, path: str, fsync: bool = False, fresh: bool = False):
        self.path = path
        self.fsync = fsync
        self.entries: list[tuple[int, int]] = []
        self.dirty = False      # entries not yet in the file (assigned with write=False)
        if fresh:           # a new log directory: no file to read
            return
        try:
            rows = read_checkpoint(path, 2)
        except CheckpointError:
            rows = []           # rebuilt from the batches by the Log when needed
        for e, o in rows:
            self.entries.append((int(e), int(o)))

    def _write(self) -> None:
        write_checkpoint(self.path, self.entries, self.fsync)
        self.dirty = False

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        i = bisect_right([o for _, o in self.entries], offset) - 1
        return self.entries[i][0] if i >= 0 else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int, write: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.
        ``write=False`` keeps a change in memory until the next assign that writes."""
        changed = False
        if epoch >= 0:
            if self.entries:
                last_e, last_o = self.entries[-1]
                if epoch > last_e and start_offset < last_o:
                    # a higher epoch cannot start before a lower one: drop conflicting entries
                    self.entries = [(e, o) for e, o in self.entries if o < start_offset]
                changed = epoch > last_e
            else:
                changed = True
            if changed:
                self.entries.append((epoch, start_offset))
        if (changed or self.dirty) and write:
            self._write()
        elif changed:
            self.dirty = True
        return changed

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to it)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to ``start_offset``: keep the epoch covering it, starting there."""
        below = [i for i, (_, o) in enumerate(self.entries) if o <= start_offset]
        if not below:
            return
        last = below[-1]
        new = [(self.entries[last][0], start_offset)] + self.entries[last + 1:]
        if new != self.entries:
            self.entries = new
            self._write()

    def clear(self) -> None:
        if self.entries:
            self.entries = []
            self._write()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers for ``requested_epoch``."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        hi = bisect_right(self.entries, requested_epoch, key=_epoch_of)
        if hi >= len(self.entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher_start = self.entries[hi][1]
        if hi == 0:
            return requested_epoch, higher_start
        return self.entries[hi - 1][0], higher_start


def _epoch_of(entry) -> int:
    return entry[0]
