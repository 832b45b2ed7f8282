"""Backend for any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, LM Studio, llama.cpp...).

How the role's JSON schema is asked for is negotiated with the server once (`engine.llm.structured`)
and recorded with every call, with the output limit (`max_tokens`) and the temperature. A model is asked
with the role's bounded schema (`engine.llm.schemas.model_schema`) and the role's output budget
(`TOKEN_CAPS`), so a reply that follows the schema is never cut short.

The model recorded is the one that answered, as the server says it: llama.cpp's server answers any model
name with the one model it serves and echoes the name it was asked, so a name that is only what was
asked (the default `gpt-4o-mini`, say) is checked against the endpoint's `GET /models` (`served_model`).

The SDK's own retries are switched off (`max_retries=0`) so that this module
alone decides what is retried: only transient failures (network, timeouts,
429, 5xx), with a bounded exponential backoff. Everything else fails at once
with a BackendError whose code becomes the call's error code, so a run never
hangs on a dead endpoint and never hammers one that rejects the request.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable

import openai

from engine.core.redact import redact
from engine.llm import structured
from engine.llm.base import (
    BackendError,
    BackendReply,
    LLMBackend,
    LLMRequest,
    estimate_prompt_tokens,
    estimate_tokens,
)
from engine.llm.schemas import TOKEN_CAPS, model_schema

_LISTED: dict[str, list[str] | None] = {}      # endpoint -> the model ids its GET /models lists (None: none)

DEFAULT_MODEL = "gpt-4o-mini"      # asked for when no model is set and the endpoint does not list exactly one
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_BACKOFF_BASE = 0.2
DEFAULT_MAX_TOKENS = 1024          # the output limit of a role with no budget in TOKEN_CAPS
CONTEXT_OVERFLOW = "CONTEXT_OVERFLOW"
_OVERFLOW_WORDS = ("context length", "context window", "context_length_exceeded", "maximum context")


def _env(*names: str) -> str | None:
    """First non-empty environment variable among `names`."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def is_retryable_status(status: int) -> bool:
    """Rate limits and server faults may pass; any other 4xx will fail the same way again."""
    return status == 429 or 500 <= status <= 599


def is_context_overflow(exc: openai.APIStatusError) -> bool:
    """A prompt longer than the model's context: OpenAI's code, or the wording llama.cpp and vLLM use."""
    text = f"{getattr(exc, 'code', '') or ''} {_error_text(exc)}".lower()
    return exc.status_code in (400, 413, 500) and any(word in text for word in _OVERFLOW_WORDS)


def _error_text(exc: openai.APIStatusError) -> str:
    """The server's own error message when it sent the usual {"error": {"message": ...}} body."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return exc.message


class OpenAIBackend(LLMBackend):
    """Chat completions whose reply is asked in the endpoint's structured-output mode, then validated."""

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        backoff_base: float = DEFAULT_BACKOFF_BASE,
        sleep: Callable[[float], None] = time.sleep,
        client: Any | None = None,
        structured_output: str | None = None,
        max_tokens: int | None = None,
    ):
        self.configured = model or _env("MEMWB_OPENAI_MODEL")
        self.model = self.configured or DEFAULT_MODEL               # the name requests carry (`_asked`)
        self.base_url = base_url or _env("MEMWB_OPENAI_BASE_URL", "OPENAI_BASE_URL")
        self.timeout = float(timeout if timeout is not None else _env("MEMWB_OPENAI_TIMEOUT") or DEFAULT_TIMEOUT)
        self.max_retries = int(max_retries if max_retries is not None
                               else _env("MEMWB_OPENAI_MAX_RETRIES") or DEFAULT_MAX_RETRIES)
        if self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        self.structured_setting = structured.check_setting(
            structured_output or _env("MEMWB_OPENAI_STRUCTURED") or structured.AUTO)
        limit = max_tokens if max_tokens is not None else _env("MEMWB_OPENAI_MAX_TOKENS")
        self.max_tokens = int(limit) if limit is not None else None     # None: each role's own budget
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        self.backoff_base = backoff_base
        self._sleep = sleep
        if client is None:
            key = api_key or _env("MEMWB_OPENAI_API_KEY", "OPENAI_API_KEY")
            if not key:
                raise ValueError(
                    "OpenAIBackend needs an API key: pass api_key=... or set MEMWB_OPENAI_API_KEY "
                    "(or OPENAI_API_KEY); local servers that ignore keys accept any placeholder, e.g. 'EMPTY'")
            client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout, max_retries=0)
        self._client = client
        self.endpoint = redact(str(getattr(client, "base_url", None) or self.base_url
                                   or "the default OpenAI endpoint"))

    def output_limit(self, role: str) -> int:
        """`max_tokens` for `role`: its budget (`TOKEN_CAPS`), lowered to the setting when one is given."""
        cap = TOKEN_CAPS.get(role)
        if cap is None:
            return self.max_tokens or DEFAULT_MAX_TOKENS
        return cap if self.max_tokens is None else min(cap, self.max_tokens)

    def listed_models(self) -> list[str] | None:
        """The model ids the endpoint's GET /models lists, asked once per endpoint for the process; None when it
        lists none or has no such route. A network failure is not cached: the call itself will say so."""
        if self.endpoint not in _LISTED:
            try:
                page = self._client.models.list()
                ids = [str(m.id) for m in (getattr(page, "data", None) or []) if getattr(m, "id", None)]
            except (openai.APITimeoutError, openai.APIConnectionError):
                return None
            except (openai.OpenAIError, ValueError, TypeError, AttributeError):
                ids = []
            _LISTED[self.endpoint] = ids or None
        return _LISTED[self.endpoint]

    def _asked(self) -> str:
        """The model requests name: the one set; with none set, the endpoint's only listed model (a local
        server serving one), else DEFAULT_MODEL."""
        if self.configured:
            return self.configured
        listed = self.listed_models()
        return listed[0] if listed is not None and len(listed) == 1 else DEFAULT_MODEL

    def served_model(self, replied: str | None) -> tuple[str, str]:
        """(the model that answered, where that is known from: "reply", "models" or "request").

        The reply's `model` when it names another model than the one asked (a server resolving an alias, as
        OpenAI's dated snapshots); else the endpoint's listing: the name asked when it is listed, the only
        model listed when the name asked is not (llama.cpp's server echoes any name and answers with the
        model it serves); else what the reply says, or failing that what was asked."""
        asked = self.model
        if replied and replied != asked:
            return replied, "reply"
        listed = self.listed_models()
        if listed is not None and asked in listed:
            return asked, "models"
        if listed is not None and len(listed) == 1:
            return listed[0], "models"
        return (replied, "reply") if replied else (asked, "request")

    def backoff(self, attempt: int) -> float:
        """Delay before retry number `attempt` (1-based): base, 2*base, 4*base..."""
        return self.backoff_base * (2 ** (attempt - 1))

    @property
    def structured_mode(self) -> str:
        """The structured-output mode of this endpoint: the setting, or what the server was found to honour."""
        if self.structured_setting != structured.AUTO:
            return self.structured_setting
        return structured.negotiate(self.endpoint, self.model, self._probe)

    def _probe(self, mode: str) -> str | None:
        """One probe request in `mode` (no retries): its reply text, or None if the server refused it."""
        try:
            completion = self._client.chat.completions.create(
                **self._request_fields(mode, "probe", structured.PROBE_MESSAGES, structured.PROBE_SCHEMA,
                                       structured.PROBE_MAX_TOKENS))
        except openai.APIStatusError:
            return None
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            code = "TIMEOUT" if isinstance(exc, openai.APITimeoutError) else "NETWORK"
            raise BackendError(code, f"{self.endpoint} (model {self.model}): the structured-output probe "
                                     f"failed ({exc.__cause__ or exc})") from exc
        except (openai.OpenAIError, ValueError):
            return None
        choices = getattr(completion, "choices", None) or []
        message = getattr(choices[0], "message", None) if choices else None
        return getattr(message, "content", None) if message is not None else None

    def _request_fields(self, mode: str, name: str, messages: list[dict], schema: dict, max_tokens: int) -> dict:
        fields = {"model": self.model, "messages": structured.messages_for(mode, messages, schema),
                  "temperature": 0, "max_tokens": max_tokens}
        fmt = structured.response_format(mode, name, schema)
        if fmt is not None:
            fields["response_format"] = fmt
        return fields

    def generate(self, request: LLMRequest) -> BackendReply:
        self.model = self._asked()
        mode = self.structured_mode
        limit = self.output_limit(request.role)
        params = {"structured": mode, "detected": self.structured_setting == structured.AUTO, "temperature": 0,
                  "max_tokens": limit}
        fields = self._request_fields(mode, request.role, request.messages,
                                      model_schema(request.role, request.schema), limit)
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                completion = self._client.chat.completions.create(**fields)
            except openai.APITimeoutError as exc:
                code, detail = "TIMEOUT", f"no answer within {self.timeout:g}s ({exc})"
            except openai.APIConnectionError as exc:
                code, detail = "NETWORK", f"connection failed ({exc.__cause__ or exc})"
            except openai.APIStatusError as exc:
                code, detail = f"HTTP_{exc.status_code}", f"HTTP {exc.status_code}: {_error_text(exc)}"
                if is_context_overflow(exc):
                    raise BackendError(CONTEXT_OVERFLOW, self._failure(detail, attempt, "the prompt does not fit"),
                                       params) from exc
                if not is_retryable_status(exc.status_code):
                    raise BackendError(code, self._failure(detail, attempt, "not retryable"), params) from exc
            except openai.OpenAIError as exc:
                detail = f"{type(exc).__name__}: {exc}"
                raise BackendError("API_ERROR", self._failure(detail, attempt, "not retryable"), params) from exc
            except ValueError as exc:
                detail = f"the reply body is not a chat completion ({exc})"
                raise BackendError("BAD_RESPONSE", self._failure(detail, attempt, "not retryable"), params) from exc
            else:
                return self._reply(completion, request, params)
            if attempt < attempts:
                self._sleep(self.backoff(attempt))
        raise BackendError(code, self._failure(detail, attempts, "gave up"), params)

    def _failure(self, detail: str, attempts: int, outcome: str) -> str:
        plural = "attempt" if attempts == 1 else "attempts"
        return f"{self.endpoint} (model {self.model}): {detail}; {outcome}, {attempts} {plural} made"

    def _reply(self, completion: Any, request: LLMRequest, params: dict) -> BackendReply:
        choices = getattr(completion, "choices", None) or []
        message = getattr(choices[0], "message", None) if choices else None
        text = getattr(message, "content", None) if message is not None else None
        finish = getattr(choices[0], "finish_reason", None) if choices else None
        if not text or not text.strip():
            refusal = getattr(message, "refusal", None) if message is not None else None
            reason = f"model refused: {refusal}" if refusal else "the reply carries no message content"
            raise BackendError("EMPTY_RESPONSE", f"{self.endpoint} (model {self.model}): {reason}", params)
        usage = getattr(completion, "usage", None)
        if usage is not None:
            prompt_tokens, completion_tokens = usage.prompt_tokens or 0, usage.completion_tokens or 0
        else:
            prompt_tokens = estimate_prompt_tokens(request.messages)
            completion_tokens = estimate_tokens(text)
        model, source = self.served_model(getattr(completion, "model", None))
        return BackendReply(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                            model=model, params={**params, "usage": usage is not None, "model_from": source},
                            finish_reason=finish)


def forget_models(endpoint: str | None = None) -> None:
    """Drop the cached model listings (of one endpoint, or all): the server behind a URL was replaced."""
    for key in [k for k in _LISTED if endpoint is None or k == endpoint]:
        del _LISTED[key]
