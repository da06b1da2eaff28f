"""Durable runs. The journal protocol and the in-memory implementation (:mod:`.journal`),
files under a state directory with a write-ahead log (:mod:`.store`, :mod:`.wal`),
PostgreSQL (:mod:`.pgstore`), and the one factory that picks one from a state path or URL
(:mod:`.registry`). Imports only :mod:`..core`."""
