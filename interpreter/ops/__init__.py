"""Operating runs: starting and resuming a durable run (:mod:`.driver`), listing, watching,
answering, cancelling and discarding runs (:mod:`.runs`), and the worker pool on
PostgreSQL (:mod:`.workers`). Imports every room but :mod:`..testing`."""
