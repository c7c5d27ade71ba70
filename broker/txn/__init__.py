"""Transaction coordinator: transactional ids, producer epochs, two-phase commit (see ``coordinator.py``).

Modules: ``metadata`` (one id's state and legal transitions), ``records`` (``__transaction_state``
key/value formats), ``coordinator`` (the coordinator), ``state_log`` (the topic as the coordinator
sees it; wiring into the broker), ``markers`` (writing and sending COMMIT/ABORT markers; the
produce-side transaction check).
"""
