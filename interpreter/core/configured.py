"""What the configuration this process loaded last says, for the rules that apply it everywhere without
importing the configuration (an import circle: the configuration checks state URLs, which are shown masked).

``load_config`` sets it; :mod:`.redact` reads it at every sink (one rule set, one place).
"""

from __future__ import annotations

REDACT: tuple[str, ...] = ()  # the `redact` patterns: secrets masked in the journal, views, logs and cassettes
