"""Plan tests: test files and their cases (:mod:`.plantest`), mocks, cassettes, the matchers
of ``expect`` (:mod:`.expect`), coverage and untested paths. Runs plans through
:mod:`..ops` exactly as production does, minus the outside world (:mod:`..core.calls`)."""
