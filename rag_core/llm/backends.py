"""The providers: one factory per SDK, each giving a ``send`` function that makes one request and
returns a ``Completion``, and the SDK's base error class (which ``LLMClient`` maps to ``LLMError``).

``BACKENDS``: provider -> factory(key, base_url, timeout_s) -> (send, the SDK's base error class).
The SDKs' own retries are off (``max_retries=0``): one ``send`` is one HTTP request.
Left out: streaming, tools, images; providers other than Anthropic and OpenAI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rag_core.llm.sdk_errors import malformed_as_error


@dataclass(frozen=True)
class Completion:
    text: str
    model: str  # the model that answered, as the API reports it
    input_tokens: int
    output_tokens: int


def checked_completion(text: Any, model: Any, input_tokens: Any, output_tokens: Any) -> Completion:
    """A ``Completion`` whose fields have the types the API documents (TypeError otherwise)."""
    if not isinstance(text, str) or not isinstance(model, str):
        raise TypeError(f"expected text and model as strings, got {type(text).__name__} and {type(model).__name__}")
    if not all(isinstance(n, int) for n in (input_tokens, output_tokens)):
        raise TypeError("expected integer token counts in 'usage'")
    return Completion(text, model, input_tokens, output_tokens)


Send = Callable[[str, str, str, int], Completion]  # send(model, system, user, max_tokens)
Backend = tuple[Send, type[Exception]]


def anthropic_backend(key: str, base_url: str | None, timeout_s: float) -> Backend:
    try:
        import anthropic
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError("LLM_PROVIDER=anthropic needs the anthropic SDK: pip install anthropic") from exc
    sdk = anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=0, timeout=timeout_s)

    def send(model: str, system: str, user: str, max_tokens: int) -> Completion:
        raw = sdk.messages.with_raw_response.create(
            model=model, system=system, max_tokens=max_tokens, messages=[{"role": "user", "content": user}]
        )
        with malformed_as_error("anthropic", model, raw.status_code):
            message = raw.parse()
            text = "".join(block.text for block in message.content if getattr(block, "type", "") == "text")
            return checked_completion(text, message.model, message.usage.input_tokens, message.usage.output_tokens)

    return send, anthropic.AnthropicError


def openai_backend(key: str, base_url: str | None, timeout_s: float) -> Backend:
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError("LLM_PROVIDER=openai needs the openai SDK: pip install openai") from exc
    sdk = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout_s)

    def send(model: str, system: str, user: str, max_tokens: int) -> Completion:
        raw = sdk.chat.completions.with_raw_response.create(
            model=model,
            max_completion_tokens=max_tokens,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        )
        with malformed_as_error("openai", model, raw.status_code):
            response = raw.parse()
            text = response.choices[0].message.content or ""
            usage = response.usage
            return checked_completion(
                text, response.model, usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0
            )

    return send, openai.OpenAIError


BACKENDS: dict[str, Callable[[str, str | None, float], Backend]] = {
    "anthropic": anthropic_backend,
    "openai": openai_backend,
}


def check_provider(provider: str) -> str:
    if provider not in BACKENDS:
        raise ValueError(f"unknown LLM provider {provider!r}; valid providers: {', '.join(BACKENDS)}")
    return provider
