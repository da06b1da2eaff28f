"""Running a plan: the execution over the schedule (:mod:`.execution`), the runners of each
step kind, attempts (retry, timeout, catch), the run's scope and options, replay on resume
(:mod:`.resume`), inputs, Ray, and the lazy twin of the engine (:mod:`.preview`). Imports the
rooms below it: core, tools, observe, stores, llm."""
