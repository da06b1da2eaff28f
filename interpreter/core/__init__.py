"""The words every room shares: statuses and event types (:mod:`.vocabulary`), the one fold
of events into run and step statuses (:mod:`.progress`), values, redaction of secrets, the
seam where a run reaches the world (:mod:`.calls`), what a runner sees (:mod:`.context`),
the project configuration (:mod:`.config`) and which state holds the runs
(:mod:`.state`). Imports nothing of the other rooms."""
