"""The plan-first gate: a deterministic complexity score 0-10 for a task (seed 003).

Three signals, each capped, summed:

* **action verbs** (cap 5): every occurrence of an imperative/infinitive work verb
  (implement, add, fix, write, deploy, ...);
* **file artefacts** (cap 3): distinct file names (``main.go``, ``docs/api.md``,
  ``Dockerfile``);
* **sequencers** (cap 2): words that chain work (then, after, finally, ...).

English, Brazilian Portuguese and Spanish. Matching is case- and accent-insensitive
(``após`` and ``apos`` both count). No model, no I/O: the same task always scores
the same, so the gate is cheap and predictable.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

VERB_CAP, FILE_CAP, SEQUENCER_CAP = 5, 3, 2
DEFAULT_THRESHOLD = 6
Mode = Literal["off", "auto", "always"]
MODES: tuple[str, ...] = ("off", "auto", "always")

# Stems get the usual inflections in _verb_forms(): add -> add, adds, added, adding.
_EN_VERBS = (
    "implement add create fix refactor write test deploy build run update remove delete rename migrate "
    "install configure integrate generate document optimize optimise replace move merge upgrade design "
    "debug patch convert port extract split rewrite translate setup benchmark profile scaffold publish "
    "release package compile lint format validate automate containerize dockerize wire hook "
    # the work an agent's tools do (a newcomer's "fetch the issue, classify it, then label it" scored 0 verbs)
    "fetch classify label summarize summarise search book send email notify triage tag assign review analyze "
    "analyse download upload query compare collect schedule reserve pay transfer refund"
).split()
_EN_IRREGULAR = (
    "wrote",
    "written",
    "writing",
    "built",
    "building",
    "ran",
    "running",
    "rewrote",
    "rewritten",
    "rewriting",
    "set up",
    "sets up",
    "setting up",
)
# pt-BR: infinitive, imperative (você), and the first-person/“vamos” forms people type.
_PT_VERBS = (
    "implementar implemente implementa adicionar adicione adiciona criar crie cria corrigir corrija corrige "
    "escrever escreva escreve testar teste testa refatorar refatore refatora implantar implante "
    "construir construa constroi rodar rode roda executar execute executa atualizar atualize atualiza "
    "remover remova remove apagar apague apaga renomear renomeie renomeia migrar migre migra instalar "
    "instale instala configurar configure configura integrar integre integra gerar gere gera "
    "documentar documente documenta otimizar otimize otimiza substituir substitua substitui mover mova "
    "move mesclar mescle publicar publique traduzir traduza converter converta extrair extraia "
    "depurar depure validar valide automatizar automatize"
).split()
_ES_VERBS = (
    "implementa implemente anadir anade anada agregar agrega agregue crear crea cree corregir corrige "
    "corrija escribir escribe escriba probar prueba pruebe desplegar despliega despliegue construye "
    "construya ejecutar ejecuta ejecute actualizar actualiza actualice eliminar elimina elimine "
    "renombrar renombra renombre migrar migra instalar instala instale configurar configura "
    "integrar integra generar genera genere documentar documenta optimizar optimiza optimice "
    "reemplazar reemplaza reemplace mover mueve mueva refactoriza refactorice refactorizar "
    "traducir traduce traduzca publicar publica publique"
).split()

# Longest first, so "and then" counts once, not as "and then" + "then".
_SEQUENCERS = (
    # en
    "and then",
    "after that",
    "afterwards",
    "followed by",
    "subsequently",
    "finally",
    "lastly",
    "then",
    "after",
    "next",
    "once done",
    "before",
    # pt-BR
    "e em seguida",
    "em seguida",
    "e depois",
    "depois disso",
    "depois",
    "por fim",
    "por ultimo",
    "finalmente",
    "apos",
    "logo apos",
    "antes de",
    "entao",
    # es
    "y luego",
    "luego",
    "a continuacion",
    "despues de",
    "despues",
    "al final",
)

_EXTENSIONS = (
    "go py pyi ts tsx js jsx mjs cjs md rst txt yaml yml json jsonl toml ini cfg conf env rs java kt kts "
    "scala c h cc cpp hpp cs rb php sh bash zsh ps1 sql html htm css scss less xml csv tsv proto tf hcl "
    "swift m mm vue svelte ipynb gradle lock mod sum dart lua r pl ex exs erl hs ml clj"
).split()
_FILE_NAMES = (
    "Dockerfile Makefile Jenkinsfile Procfile Gemfile Rakefile Vagrantfile Containerfile Justfile "
    "README CHANGELOG LICENSE CONTRIBUTING AUTHORS NOTICE"  # extension-less artefacts, as chatcli counts them
).split()
_FILE = re.compile(
    r"(?<![\w./-])[\w./-]*\w\.(?:" + "|".join(_EXTENSIONS) + r")(?![\w-])"
    r"|(?<![\w./-])(?:[\w./-]*/)?(?:" + "|".join(_FILE_NAMES) + r")(?![\w.-])",  # from a path's start only
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Score:
    """A task's complexity: the capped parts, their sum, and what matched."""

    verbs: int
    files: int
    sequencers: int
    matched_verbs: tuple[str, ...] = ()
    matched_files: tuple[str, ...] = ()
    matched_sequencers: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.verbs + self.files + self.sequencers

    def to_json(self) -> dict:
        return {
            "score": self.total,
            "parts": {
                "verbs": {"score": self.verbs, "cap": VERB_CAP, "matched": list(self.matched_verbs)},
                "files": {"score": self.files, "cap": FILE_CAP, "matched": list(self.matched_files)},
                "sequencers": {
                    "score": self.sequencers,
                    "cap": SEQUENCER_CAP,
                    "matched": list(self.matched_sequencers),
                },
            },
        }


def score(task: str) -> Score:
    """Every part of the complexity score of ``task``."""
    files = _distinct(m.group(0).rstrip(".") for m in _FILE.finditer(task))
    prose = _fold(_FILE.sub(" ", task))  # file names must not count as words ("add.py" is no verb)
    verbs = _distinct(_verbs(prose))  # a repeated verb counts once ("fix fix fix" is one action)
    sequencers = tuple(m.group(1) for m in _sequencer_pattern().finditer(prose))
    return Score(
        verbs=min(len(verbs), VERB_CAP),
        files=min(len(files), FILE_CAP),
        sequencers=min(len(sequencers), SEQUENCER_CAP),
        matched_verbs=verbs,
        matched_files=files,
        matched_sequencers=sequencers,
    )


def complexity_score(task: str) -> int:
    """0..10: action verbs (cap 5) + file artefacts (cap 3) + sequencing words (cap 2)."""
    return score(task).total


def should_plan_first(task: str, mode: str = "auto", threshold: int = DEFAULT_THRESHOLD) -> bool:
    """``off``: never; ``always``: always; ``auto``: when the score reaches ``threshold``."""
    if mode not in MODES:
        raise ValueError(f"plan-first mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "off":
        return False
    return mode == "always" or complexity_score(task) >= threshold


def _verbs(prose: str):
    """Each verb occurrence; ``set up`` is one verb, a bare ``set`` none."""
    forms = _verb_forms()
    for match in re.finditer(r"[a-z]+(?:\s+up\b)?", prose):
        word = match.group(0)
        if word in forms:
            yield " ".join(word.split())
        elif word.split()[0] in forms:
            yield word.split()[0]


# --- word lists -----------------------------------------------------------------------------


def _fold(text: str) -> str:
    """Lower case without accents: ``Após`` -> ``apos``, ``Añade`` -> ``anade``."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@lru_cache(maxsize=1)
def _verb_forms() -> frozenset[str]:
    forms = {_fold(w) for w in _PT_VERBS + _ES_VERBS}
    forms.update(_EN_IRREGULAR)
    for stem in _EN_VERBS:
        forms.update(_english_inflections(stem))
    return frozenset(forms)


def _english_inflections(stem: str) -> set[str]:
    if stem.endswith("e"):
        return {stem, stem + "s", stem + "d", stem[:-1] + "ing"}
    if stem.endswith(("x", "s", "sh", "ch")):
        return {stem, stem + "es", stem + "ed", stem + "ing"}
    doubled = stem + stem[-1] if stem in ("run", "debug", "wrap") else stem
    return {stem, stem + "s", stem + "ed", stem + "ing", doubled + "ed", doubled + "ing"}


@lru_cache(maxsize=1)
def _sequencer_pattern() -> re.Pattern[str]:
    words = sorted({_fold(s) for s in _SEQUENCERS}, key=len, reverse=True)
    alternatives = "|".join(r"\s+".join(map(re.escape, w.split())) for w in words)
    return re.compile(r"(?<![a-z])(" + alternatives + r")(?![a-z])")


def _distinct(items) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
