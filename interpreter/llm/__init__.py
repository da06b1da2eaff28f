"""Model calls: a step's conversation through litellm (:mod:`.conversation`), the runner of
``llm:`` steps, the planner, the durable agent loop, complexity scores, the worst-case cost
of a plan (:mod:`.estimate`) and the preflight of models and credentials. Imports
:mod:`..core`, :mod:`..tools` and :mod:`..stores`."""
