"""Watching a run from outside: OpenTelemetry traces (:mod:`.otel`), fed by the events.
Imports only :mod:`..core`."""
