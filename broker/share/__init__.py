"""Share groups (KIP-932): queue-like consumption where members of a group share partitions and
each record goes to one member at a time (``manager.py`` is the entry point)."""
