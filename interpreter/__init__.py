"""The interpreter: runs a valid plan, durably, and tests it.

Rooms, each a subpackage; a room imports only the rooms before it in this list (and
``dagplan.dsl``), and ``tests/test_one_engine.py`` holds every module to it::

    core     the words every room shares: statuses and events, the one fold of events
             into statuses, values, redaction, the call seam, the runner's view, configuration
    tools    where a run's tools come from (Python functions today), and how they are called
    observe  watching a run from outside: OpenTelemetry traces
    stores   durable runs: the journal protocol, files (WAL), PostgreSQL, the factory by URL
    llm      model calls: conversations, LLM steps, the planner, the agent, scores, cost
    engine   running a plan: the execution, runners, attempts, replay on resume, preview
    ops      operating runs: starting and resuming them, listing and answering, workers
    testing  plan tests: cases, mocks, cassettes, matchers, coverage, untested paths
"""
