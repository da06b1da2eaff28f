"""Where a run's tools come from and how they are described: Python functions from a tools
file or module (:mod:`.catalog`). Imports only :mod:`..core`."""
