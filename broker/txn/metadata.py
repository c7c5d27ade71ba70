"""The state of one transactional id and its legal transitions (Kafka's ``TransactionMetadata``).

How this works
--------------
A ``TxnMetadata`` is the coordinator's cached view of the last record written for the id.  A
change is made in two steps, so that the cache never runs ahead of ``__transaction_state``:

1. ``prepare_*`` checks that the move is legal, sets ``pending`` to the target state and returns
   a ``Transit`` (the complete proposed record).  While ``pending`` is set every other request
   for the id is answered CONCURRENT_TRANSACTIONS.
2. After the record is written, ``complete(transit)`` installs it; after a failed write
   ``abandon()`` clears ``pending`` and the cache is unchanged.

States and where they may come from:

================== =========================================== ==================================
state              reached from                                meaning
================== =========================================== ==================================
Empty              Empty, CompleteCommit, CompleteAbort        producer (re)initialised, no txn
Ongoing            Ongoing, Empty, CompleteCommit, CompleteAbort partitions added, txn open
PrepareCommit      Ongoing                                     commit decided, markers pending
PrepareAbort       Ongoing, PrepareEpochFence (and, under      abort decided, markers pending
                   transaction version 2, Empty and Complete*:
                   an abort with no partition added)
CompleteCommit     PrepareCommit                               every COMMIT marker written
CompleteAbort      PrepareAbort                                every ABORT marker written
Dead               Empty, CompleteCommit, CompleteAbort        id expired (a tombstone follows)
PrepareEpochFence  Ongoing                                     never written: the epoch is being
                                                               bumped to abort an open txn
================== =========================================== ==================================

Epochs: a client may use ``producer_epoch`` only.  InitProducerId bumps it (fencing older
producers); an epoch at 32766 or above is "exhausted" and the next InitProducerId hands out a
new producer id at epoch 0.  ``last_producer_epoch`` lets a retried InitProducerId (KIP-360)
be answered with the epoch it already produced instead of bumping again.

Transaction version 2 (KIP-890 part 2; ``client_transaction_version`` 2): every EndTxn bumps the
epoch.  Prepare* carries epoch + 1 (markers are written with it) and ``last_producer_epoch`` the
epoch the client used.  At an exhausted epoch Prepare* also carries ``next_producer_id``, a fresh
producer id, and Complete* moves to it at epoch 0 (``previous_producer_id`` keeps the old one, so
a retried EndTxn is recognised).

Not thread-safe; owned by the event loop.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {v: k for k, v in _NAMES.items()}

S = TxnState
VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}
EXPIRABLE = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
PENDING_TXN = {S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT}


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True)
class Transit:
    """A proposed record for the id (what will be written to ``__transaction_state``)."""
    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset
    start_ms: int
    update_ms: int
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


class TxnMetadata:
    def __init__(self, transactional_id: str, producer_id: int, producer_epoch: int, timeout_ms: int,
                 state: TxnState, partitions=(), start_ms: int = -1, last_update_ms: int = -1,
                 previous_producer_id: int = NO_PRODUCER_ID, last_producer_epoch: int = NO_PRODUCER_EPOCH,
                 next_producer_id: int = NO_PRODUCER_ID, client_transaction_version: int = 0):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.timeout_ms = timeout_ms
        self.state = TxnState(state)
        self.partitions: set[tuple[str, int]] = set(partitions)
        self.start_ms = start_ms
        self.last_update_ms = last_update_ms
        self.next_producer_id = next_producer_id
        self.client_transaction_version = client_transaction_version
        self.pending: TxnState | None = None
        self.failed_epoch_fence = False

    def __repr__(self):
        return (f"TxnMetadata({self.transactional_id!r}, pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"state={self.state.display}, pending={self.pending and self.pending.display}, "
                f"partitions={sorted(self.partitions)})")

    @property
    def pending_in_progress(self) -> bool:
        return self.pending is not None

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    # ------------------------------------------------------------------ preparing
    def _prepare(self, state: TxnState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions, start_ms: int, update_ms: int, next_producer_id: int | None = None,
                 client_transaction_version: int | None = None) -> Transit:
        if self.pending is not None:
            raise IllegalTransition(f"{self.transactional_id}: transition to {state.display} while "
                                    f"{self.pending.display} is pending")
        if producer_id < 0:
            raise IllegalTransition(f"illegal producer id {producer_id}")
        if state != S.DEAD and epoch < 0:
            raise IllegalTransition(f"illegal producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.display} -> {state.display} "
                                    f"is not a legal transition")
        self.pending = state
        return Transit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state,
                       frozenset(partitions), start_ms, update_ms,
                       self.next_producer_id if next_producer_id is None else next_producer_id,
                       self.client_transaction_version if client_transaction_version is None
                       else client_transaction_version)

    def prepare_fence_epoch(self) -> Transit:
        """Bump the epoch so an open transaction can be aborted under it (never written itself)."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition("cannot fence a producer whose epoch is already the maximum")
        bumped = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH,
                             self.timeout_ms, self.partitions, self.start_ms, self.last_update_ms)

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now: int):
        """InitProducerId on an id with no open transaction: (error, Transit)."""
        if self.epoch_exhausted:
            raise IllegalTransition("no producer epochs left for this producer id")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch   # a retry of a bump that worked
        else:
            from protocol.errors import ErrorCode as E
            return E.PRODUCER_FENCED, None
        return 0, self._prepare(S.EMPTY, self.producer_id, epoch, last, timeout_ms, (), -1, now)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> Transit:
        if self.state in PENDING_TXN:
            raise IllegalTransition("cannot rotate the producer id while a transaction is open")
        return self._prepare(S.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             timeout_ms, (), -1, now)

    def prepare_add_partitions(self, partitions, now: int, client_transaction_version: int = 0) -> Transit:
        start = now if self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else self.start_ms
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions | set(partitions), start, now,
                             client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(self, state: TxnState, now: int, *, tv2: bool = False,
                                next_producer_id: int = NO_PRODUCER_ID, no_partition_added: bool = False) -> Transit:
        """Prepare*.  Under transaction version 2 the epoch is bumped (``next_producer_id`` is set
        when the bump exhausts it) and an abort with no partition added starts now."""
        if not tv2:
            return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                                 self.timeout_ms, self.partitions, self.start_ms, now)
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition("cannot bump a producer epoch that is already the maximum")
        return self._prepare(state, self.producer_id, self.producer_epoch + 1, self.producer_epoch,
                             self.timeout_ms, self.partitions, now if no_partition_added else self.start_ms,
                             now, next_producer_id, 2)

    def prepare_complete(self, now: int) -> Transit:
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.failed_epoch_fence = False
        pid, epoch = self.producer_id, self.producer_epoch
        if self.client_transaction_version >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            pid, epoch = self.next_producer_id, 0       # the bump exhausted the epoch: a new producer id
        return self._prepare(state, pid, epoch, self.last_producer_epoch, self.timeout_ms, (), self.start_ms, now,
                             NO_PRODUCER_ID)

    def prepare_dead(self) -> Transit:
        return self._prepare(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, (), self.start_ms, self.last_update_ms)

    # ------------------------------------------------------------------ completing
    def complete(self, t: Transit) -> None:
        """Install ``t`` once its record is written."""
        if self.pending != t.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {t.state.display} but pending is "
                                    f"{self.pending and self.pending.display}")
        self.pending = None
        self.previous_producer_id = t.previous_producer_id if t.producer_id != self.producer_id \
            else self.previous_producer_id
        self.producer_id = t.producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.timeout_ms = t.timeout_ms
        self.state = t.state
        self.partitions = set(t.partitions)
        self.start_ms = t.start_ms
        self.last_update_ms = t.update_ms
        self.next_producer_id = t.next_producer_id
        self.client_transaction_version = t.client_transaction_version

    def abandon(self) -> None:
        self.pending = None

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for t, p in sorted(self.partitions):
            out.setdefault(t, []).append(p)
        return out


def transit_topics(t: Transit) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, p in sorted(t.partitions):
        out.setdefault(topic, []).append(p)
    return out
