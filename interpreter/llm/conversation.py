"""LLM steps: one model conversation per ``llm:`` step, through litellm.

``run_llm_step`` sends the resolved prompt (plus the step's narrowed tools as
function schemas), runs the tools the model calls, loops until the model
answers without calling tools or ``max_iterations`` model calls were made,
then returns the final text, or the JSON value when an ``output_schema`` is
given (validated). With a branching output path the model also picks the
alternative through structured output.

Every completed model call and every tool call made inside the step is
memoized by a content hash (step id, model, messages, parameters): on resume
the conversation is replayed from the memo for free and only the interrupted
call is paid again. Tokens and cost come from litellm's offline cost map.

litellm is imported only inside :func:`litellm_module` (it takes ~3 s).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Protocol, Sequence

from ...dsl.errors import DagplanError, error
from ...dsl.ir import LLMCall, ToolSpec

DEFAULT_MAX_ITERATIONS = 5
# Keys of completion_kwargs that say *where* and *as whom* to call, not *what*:
# left out of memo keys so a resume with another key or endpoint still replays.
_TRANSPORT_KEYS = frozenset(
    {
        "api_base",
        "base_url",
        "api_key",
        "api_version",
        "timeout",
        "num_retries",
        "max_retries",
        "organization",
        "extra_headers",
        "custom_llm_provider",
    }
)
TRANSIENT_CODES = frozenset({"llm-unavailable"})


# --- errors ---------------------------------------------------------------------------------


class LLMStepError(DagplanError):
    """An LLM step failed: the call failed, the output broke its schema, or a bound was hit.

    Codes: ``llm-call-failed`` (auth, bad request, unknown model), ``llm-unavailable``
    (rate limit, timeout, connection, 5xx: worth retrying), ``output-schema``,
    ``max-iterations``.
    """

    @property
    def transient(self) -> bool:
        return self.code in TRANSIENT_CODES

    @property
    def retryable(self) -> bool:  # what the engine's retry policy looks at
        return self.transient


class BudgetExceeded(DagplanError):
    """A run's ``max_cost`` or ``max_tokens`` was reached (code ``budget-exceeded``): the run stops."""

    stops_run = True


def _fail(code: str, step_id: str, message: str, hint: str | None = None) -> LLMStepError:
    return LLMStepError(error(code, f"step '{step_id}': {message}", hint=hint))


# --- results, memo, budget -----------------------------------------------------------------


@dataclass(frozen=True)
class LLMResult:
    output: Any  # final text, or the parsed JSON value when an output_schema is given
    alternative: int = 0  # chosen alternative of a branching output path
    prompt_tokens: int = 0  # these three include replayed calls: what the step cost in all
    completion_tokens: int = 0
    cost: float = 0.0
    calls: int = 0  # model requests actually sent (replayed ones excluded)
    replayed: int = 0  # model calls answered from the memo
    model: str = ""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Memo(Protocol):
    """The durable store's memo, keyed by content hash; replays completed calls.

    A memo that also has ``async def commit()`` gets it awaited after every put,
    so each completed call is durable before the next one is paid for.
    """

    def memo_get(self, key: str) -> tuple[bool, Any]: ...

    def memo_put(self, key: str, value: Any, call: Mapping[str, Any] | None = None) -> None: ...


@dataclass
class MemoryMemo:
    """A memo in a dict (tests, and runs without a store)."""

    values: dict[str, Any] = field(default_factory=dict)

    def memo_get(self, key: str) -> tuple[bool, Any]:
        return (key in self.values, self.values.get(key))

    def memo_put(self, key: str, value: Any, call: Mapping[str, Any] | None = None) -> None:
        self.values[key] = value


@dataclass
class Budget:
    """Tokens and cost spent in a run, checked against ``max_cost`` / ``max_tokens``.

    ``run_llm_step`` charges every model call (replayed ones too, so a resumed run
    that seeds ``spent`` from its completed steps counts each call once) and checks
    before sending a request, so a run stops cleanly instead of paying past the limit.
    """

    max_cost: float | None = None
    max_tokens: int | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    by_step: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def charge(self, step_id: str, prompt_tokens: int = 0, completion_tokens: int = 0, cost: float = 0.0) -> None:
        """Record what a call cost; raises :class:`BudgetExceeded` once a limit is passed."""
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.cost += cost
        row = self.by_step.setdefault(step_id, {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0})
        row["prompt_tokens"] += prompt_tokens
        row["completion_tokens"] += completion_tokens
        row["cost"] += cost
        self._raise_if(step_id, strict=True)

    def check(self, step_id: str = "") -> None:
        """Raise if nothing more may be spent (a limit is reached)."""
        self._raise_if(step_id, strict=False)

    def _raise_if(self, step_id: str, strict: bool) -> None:
        over = (lambda spent, cap: spent > cap) if strict else (lambda spent, cap: spent >= cap)
        where = f" (at step '{step_id}')" if step_id else ""
        if self.max_cost is not None and over(self.cost, self.max_cost):
            raise BudgetExceeded(
                error(
                    "budget-exceeded",
                    f"cost budget reached: ${self.cost:.6f} of max_cost ${self.max_cost:.6f}{where}",
                    hint="raise max_cost (completed model calls are memoized: a resume does not pay them again)",
                )
            )
        if self.max_tokens is not None and over(self.tokens, self.max_tokens):
            raise BudgetExceeded(
                error(
                    "budget-exceeded",
                    f"token budget reached: {self.tokens} of max_tokens {self.max_tokens}{where}",
                    hint="raise max_tokens (completed model calls are memoized: a resume does not pay them again)",
                )
            )

    def to_json(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "max_cost": self.max_cost,
            "max_tokens": self.max_tokens,
        }


# --- litellm --------------------------------------------------------------------------------


def litellm_module():
    """Import litellm on first use, offline cost map, no telemetry or banners."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


def default_model(explicit: str | None = None, configured: str | None = None) -> str:
    """The step's model, else the run's (:func:`.config.chosen_model`: the one order); a clear error when none."""
    from ..core.config import MODEL_ORDER, chosen_model

    model = chosen_model(step=explicit, given=configured)
    if not model:
        raise LLMStepError(error("no-model", "no model configured for an LLM step", hint=MODEL_ORDER))
    return model


def supports_schema(model: str) -> bool:
    from .local import is_local

    if is_local(model):
        return True  # its schema becomes a grammar
    try:
        return bool(litellm_module().supports_response_schema(model=model))
    except Exception:  # unknown provider/model: be conservative
        return False


class MemoKey(str):
    """A call's memo key (the one digest of what was asked), with the key a journal written before that digest
    kept it under (``legacy``: the same call, spaced JSON), so a run interrupted then resumes without asking
    again, or acting again for a tool call a model step made."""

    legacy: str | None = None


def memo_key(kind: str, step_id: str, model: str, payload: Any) -> MemoKey:
    """Content hash of a call: what was asked, never where or with which key."""
    from ..core.digest import digest

    key = MemoKey("llm:" + digest([kind, step_id, model, payload]))
    blob = json.dumps([kind, step_id, model, payload], sort_keys=True, ensure_ascii=False, default=str)
    key.legacy = "llm:" + hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()
    return key


def recall(memo: Any, key: str) -> tuple[bool, Any]:
    """What ``memo`` holds for ``key`` (a :class:`MemoKey`: under its legacy key too); no memo holds nothing."""
    if memo is None:
        return False, None
    found = memo.memo_get(key)
    legacy = getattr(key, "legacy", None)
    return found if found[0] or legacy is None else memo.memo_get(legacy)


async def complete(
    model: str,
    messages: Sequence[dict],
    params: Mapping[str, Any],
    completion_kwargs: Mapping[str, Any],
    step_id: str = "",
    on_text: Callable[[str], None] | None = None,
) -> dict:
    """One model call -> a JSON-able record ``{message, usage, cost, model}`` (what the memo stores). With
    ``on_text``, the answer is streamed and each piece of its text handed to it as it is written (the
    record is the same)."""
    from .local import Truncated, complete_local, is_local

    if is_local(model):  # the bundled small model, in-process (no litellm, no network)
        try:
            return await complete_local(model, messages, params, on_text)
        except DagplanError:
            raise
        except Truncated as cut:  # never taken for an answer: the step fails, and says why
            raise _fail("llm-truncated", step_id, f"the model stopped at max_tokens inside its tool call or answer: "
                        f"{_clip(str(cut))}", hint="raise the step's max_tokens (or the model's), or shorten "
                        "what it must write") from None  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - llama.cpp's refusals (a prompt over the context...)
            raise _call_error(step_id, model, exc) from None
    litellm = litellm_module()
    # The step's retry policy (backoff, attempts, events) owns retrying; the SDK's
    # own silent retries would multiply it. A caller may still pass max_retries.
    transport = {"max_retries": 0, **completion_kwargs}
    try:
        if on_text is None:
            response = await litellm.acompletion(model=model, messages=list(messages), **params, **transport)
        else:
            response = await _streamed(litellm, model, messages, params, transport, on_text)
    except Exception as exc:  # litellm maps providers' errors onto openai's classes
        raise _call_error(step_id, model, exc) from None
    message = response.choices[0].message
    return {
        "message": _message_dict(message),
        "usage": {
            "prompt_tokens": _usage(response, "prompt_tokens"),
            "completion_tokens": _usage(response, "completion_tokens"),
        },
        "cost": _cost(litellm, response),
        "model": getattr(response, "model", None) or model,
    }


async def _streamed(litellm: Any, model: str, messages: Sequence[dict], params: Mapping[str, Any],
                    transport: Mapping[str, Any], on_text: Callable[[str], None]) -> Any:  # fmt: skip
    """A streamed completion (usage asked for in the stream), each piece of text handed to ``on_text``, put
    back together as one response (``litellm.stream_chunk_builder``): usage and cost as for any call."""
    stream = await litellm.acompletion(model=model, messages=list(messages), stream=True,
                                       stream_options={"include_usage": True}, **params, **transport)  # fmt: skip
    chunks = []
    async for chunk in stream:
        chunks.append(chunk)
        choices = getattr(chunk, "choices", None) or []
        piece = getattr(getattr(choices[0], "delta", None), "content", None) if choices else None
        if piece:
            on_text(piece)
    return litellm.stream_chunk_builder(chunks, messages=list(messages))


def _message_dict(message: Any) -> dict:
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments or "{}"},
            }
            for c in calls
        ]
    return out


def _usage(response: Any, name: str) -> int:
    usage = getattr(response, "usage", None)
    return int(getattr(usage, name, 0) or 0)


def _cost(litellm: Any, response: Any) -> float:
    hidden = getattr(response, "_hidden_params", None) or {}
    if hidden.get("response_cost") is not None:
        return float(hidden["response_cost"])
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # a model without a known price costs "unknown", counted as 0
        return 0.0


def _call_error(step_id: str, model: str, exc: Exception) -> LLMStepError:
    status = getattr(exc, "status_code", None)
    transient_names = ("RateLimit", "Timeout", "APIConnection", "ServiceUnavailable", "InternalServer")
    transient = any(n in type(exc).__name__ for n in transient_names) or (isinstance(status, int) and status >= 500)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return _fail(
        "llm-unavailable" if transient else "llm-call-failed",
        step_id,
        f"model '{model}' call failed: {type(exc).__name__}: {text[:500]}",
        hint=None if transient else "check the model name and the provider's API key environment variable",
    )


# --- the step -------------------------------------------------------------------------------

ToolFn = Callable[..., Awaitable[Any]]


@dataclass
class _Conversation:
    """One step's running conversation: what it asked, what it spent."""

    step_id: str
    model: str
    params: dict[str, Any]
    completion_kwargs: Mapping[str, Any]
    memo: Memo | None
    budget: Budget | None
    via: Any = None  # calls.Calls: mocks or a cassette answer instead of the model
    alternatives: tuple[str, ...] = ()
    on_call: Any = None  # called with (model, record, seconds) after each model call made (not replayed)
    messages: list[dict] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    calls: int = 0
    replayed: int = 0
    answered_by: str = ""

    async def ask(self) -> dict:
        """The next assistant message: from the memo when this exact call completed before."""
        key = memo_key("completion", self.step_id, self.model, {"messages": self.messages, "params": self.params})
        hit, record = recall(self.memo, key)
        if hit:
            self.replayed += 1
        else:
            if self.budget:
                self.budget.check(self.step_id)
            request, started = {"messages": list(self.messages), "params": self.params}, time.perf_counter()
            record = await self._complete()
            self.calls += 1
            call = {"kind": "model", "model": self.model, "request": request, "duration": _since(started)}
            if self.on_call is not None:
                self.on_call(self.model, record, call["duration"])
            await self._remember(key, record, call)
        self._account(record)
        self.messages.append(record["message"])
        return record["message"]

    def _complete(self) -> Awaitable[dict]:
        def real() -> Awaitable[dict]:
            return complete(self.model, self.messages, self.params, self.completion_kwargs, self.step_id)

        if self.via is None:
            return real()
        from ..core.calls import ModelCall

        return self.via.model(ModelCall(self.step_id, self.model, self.messages, self.params, self.alternatives), real)

    async def _remember(self, key: str, value: Any, call: Mapping[str, Any] | None = None) -> None:
        if self.memo is None:
            return
        self.memo.memo_put(key, value, call)
        commit = getattr(self.memo, "commit", None)
        if commit is not None:
            await commit()

    def _account(self, record: dict) -> None:
        usage = record.get("usage", {})
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)
        self.cost += record.get("cost", 0.0)
        self.answered_by = record.get("model") or self.answered_by
        if self.budget:
            self.budget.charge(
                self.step_id, usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), record.get("cost", 0.0)
            )

    async def run_tool_calls(self, calls: list[dict], tools: Mapping[str, ToolFn]) -> None:
        for call in calls:
            key = memo_key("tool", self.step_id, self.model, {"messages": self.messages, "call": call})
            hit, content = recall(self.memo, key)
            if not hit:
                started = time.perf_counter()
                content = await _run_tool(call, tools)
                function = call["function"]
                record = {
                    "kind": "tool",
                    "name": function["name"],
                    "args": _arguments(function),
                    "duration": _since(started),
                }
                await self._remember(key, content, record)
            self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 6)


def _arguments(function: Mapping[str, Any]) -> Any:
    from ...dsl.jsontext import value_or_text

    return value_or_text(function.get("arguments") or "{}")


async def _run_tool(call: dict, tools: Mapping[str, ToolFn]) -> str:
    """Run one tool call; problems go back to the model as the tool's answer, not as a failure."""
    name = call["function"]["name"]
    if name not in tools:  # a tool named as the model must spell it (``git.status`` is ``git__status``)
        name = next((n for n in tools if function_name(n) == name), name)
    if name not in tools:
        return f"error: unknown tool '{name}'; available: {', '.join(sorted(tools)) or 'none'}"
    from ...dsl.jsontext import loads

    try:
        args = loads(call["function"].get("arguments") or "{}")
    except ValueError as exc:
        return f"error: arguments are not valid JSON ({exc})"
    if not isinstance(args, dict):
        return "error: arguments must be a JSON object"
    try:
        value = await tools[name](**args)
    except DagplanError:
        raise
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


async def run_llm_step(
    step_id: str,
    call: LLMCall,
    prompt: str,
    system: str | None,
    *,
    model: str,
    tools: Mapping[str, ToolFn] = {},
    tool_specs: Mapping[str, ToolSpec] = {},
    alternatives: tuple[str, ...] = (),
    memo: Memo | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    completion_kwargs: Mapping[str, Any] = {},
    budget: Budget | None = None,
    calls: Any = None,
    on_call: Callable[[str, dict, float], None] | None = None,
) -> LLMResult:
    """Run an ``llm:`` step whose prompt and system text are already resolved.

    ``max_iterations`` bounds the number of model calls (``call.max_iterations``
    wins when set). Raises :class:`LLMStepError` or :class:`BudgetExceeded`.
    """
    shape = _OutputShape.of(call.output_schema, alternatives)
    structured = calls.structured if calls is not None else supports_schema
    params = _params(call, tool_specs, shape, structured(model) if shape.schema is not None else False)
    conv = _Conversation(step_id, model, params, dict(completion_kwargs), memo, budget, calls, alternatives, on_call)
    conv.messages = _opening(
        prompt, system, shape, native=bool(conv.params.get("response_format", {}).get("json_schema"))
    )
    bound = call.max_iterations or max_iterations
    for _ in range(bound):
        message = await conv.ask()
        if not message.get("tool_calls"):
            output, alternative = shape.read(step_id, message.get("content") or "")
            return LLMResult(
                output,
                alternative,
                conv.prompt_tokens,
                conv.completion_tokens,
                conv.cost,
                conv.calls,
                conv.replayed,
                conv.answered_by or model,
            )
        await conv.run_tool_calls(message["tool_calls"], tools)
    raise _fail(
        "max-iterations",
        step_id,
        f"the model was still calling tools after {bound} model calls (max_iterations {bound})",
        hint="raise max_iterations on the step (or step_max_iterations in the config), or narrow the task",
    )


def _params(call: LLMCall, tool_specs: Mapping[str, ToolSpec], shape: "_OutputShape", native: bool) -> dict:
    params: dict[str, Any] = {k: v for k, v in dict(call.params).items() if k not in _TRANSPORT_KEYS}
    specs = [tool_specs[name] for name in call.tools if name in tool_specs] or list(tool_specs.values())
    if specs:
        params["tools"] = [tool_schema(s) for s in specs]
    if shape.schema is not None:
        params["response_format"] = shape.response_format(native)
    return params


def tool_schema(spec: ToolSpec) -> dict:
    """A ToolSpec as an OpenAI function tool."""
    parameters = json.loads(json.dumps(spec.parameters, default=dict))
    name = function_name(spec.name)
    return {
        "type": "function",
        "function": {"name": name, "description": spec.description or spec.name, "parameters": parameters},
    }


def function_name(tool: str) -> str:
    """A tool's name as providers accept a function's (``[A-Za-z0-9_-]``): an MCP tool ``git.status`` is
    ``git__status``; a Python tool's name is itself."""
    return re.sub(r"[^A-Za-z0-9_-]", "__", tool)


def _opening(prompt: str, system: str | None, shape: "_OutputShape", native: bool) -> list[dict]:
    instructions = [system] if system else []
    if shape.schema is not None and not native:
        instructions.append(shape.instruction())
    messages = [{"role": "system", "content": "\n\n".join(instructions)}] if instructions else []
    return messages + [{"role": "user", "content": prompt}]


# --- structured output ----------------------------------------------------------------------


@dataclass(frozen=True)
class _OutputShape:
    """What the final answer must look like: free text, a JSON value, or a choice plus a value."""

    schema: dict | None
    value_schema: dict | None
    alternatives: tuple[str, ...] = ()

    @classmethod
    def of(cls, output_schema: Mapping[str, Any] | None, alternatives: tuple[str, ...]) -> "_OutputShape":
        value = json.loads(json.dumps(output_schema, default=dict)) if output_schema is not None else None
        if len(alternatives) < 2:
            return cls(value, value)
        wrapped = {
            "type": "object",
            "properties": {
                "alternative": {
                    "type": "string",
                    "enum": list(alternatives),
                    "description": "where the result goes: pick the path that fits the outcome",
                },
                "value": value if value is not None else {"description": "the result"},
            },
            "required": ["alternative", "value"],
            "additionalProperties": False,
        }
        return cls(wrapped, value, alternatives)

    def response_format(self, native: bool) -> dict:
        if native:
            return {
                "type": "json_schema",
                "json_schema": {"name": "step_output", "schema": self.schema, "strict": False},
            }
        return {"type": "json_object"}

    def instruction(self) -> str:
        return "Answer with one JSON value only (no prose, no code fences) matching this JSON Schema:\n" + json.dumps(
            self.schema, indent=1
        )

    def read(self, step_id: str, content: str) -> tuple[Any, int]:
        if self.schema is None:
            return content, 0
        value = parse_json(content)
        if value is _NOT_JSON:
            raise _fail(
                "output-schema",
                step_id,
                f"the model's answer is not JSON: {_clip(content)}",
                hint="the step has an output_schema; a model that supports structured output helps",
            )
        _check(step_id, value, self.schema)
        if not self.alternatives:
            return value, 0
        return value["value"], self.alternatives.index(value["alternative"])


_NOT_JSON = object()
NOT_JSON = _NOT_JSON  # what parse_json returns when the text holds no JSON value


_STARTS_TRIED = 16  # a model's prose before its JSON opens few brackets; each try reads at most the whole text


def parse_json(text: str) -> Any:
    """The first JSON value in a model's answer (tolerates code fences and prose around it): the whole text,
    else from each of its first brackets (at most :data:`_STARTS_TRIED`: linear in the answer, whatever it
    holds). Nesting past the one limit (:mod:`dagplan.dsl.jsontext`) is no JSON value."""
    import re

    from ...dsl.jsontext import loads, raw_decode

    text = text.strip()
    try:
        return loads(text)
    except ValueError:
        pass
    for tried, found in enumerate(re.finditer(r"[{\[]", text)):
        if tried == _STARTS_TRIED:
            break
        try:
            return raw_decode(text, found.start())[0]
        except ValueError:
            continue
    return _NOT_JSON


def _check(step_id: str, value: Any, schema: dict) -> None:
    import jsonschema

    problems = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path))
    if problems:
        first = problems[0]
        where = "".join(f"[{p!r}]" for p in first.absolute_path) or "the answer"
        raise _fail(
            "output-schema",
            step_id,
            f"the model's answer does not match output_schema: {where}: "
            f"{first.message}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
        )


def _clip(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= n else text[:n] + "...")
