"""Token counts of a batch of LLM calls, and what they cost at the provider's list price.

``PRICES_PER_MTOK`` holds list prices in US dollars per million tokens (input, output) for the
models whose price is known here; a model matches its longest listed prefix, so a dated name like
``claude-sonnet-4-5-20250929`` is priced as ``claude-sonnet-4-5``. Any other model's cost is
unknown (None), never guessed. Prices change: check the provider's page before trusting a figure.

Left out: cached-input and batch discounts, currency conversion.
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_core.llm import Completion

# model prefix -> (USD per million input tokens, USD per million output tokens); list prices
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.0),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.0, 8.0),
}


@dataclass(frozen=True)
class TokenUsage:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def plus(self, completion: Completion) -> "TokenUsage":
        return TokenUsage(self.calls + 1, self.input_tokens + completion.input_tokens,
                          self.output_tokens + completion.output_tokens)


def price_of(model: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens for `model`, or None when unknown."""
    matches = [prefix for prefix in PRICES_PER_MTOK if model == prefix or model.startswith(prefix + "-")]
    return PRICES_PER_MTOK[max(matches, key=len)] if matches else None


def estimate_cost(model: str, usage: TokenUsage) -> float | None:
    """US dollars for `usage` at `model`'s list price; None when the price is unknown."""
    price = price_of(model)
    if price is None:
        return None
    return (usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1_000_000


def describe_cost(model: str, usage: TokenUsage) -> str:
    """``"1,234 input + 567 output tokens in 10 calls, about $0.0123 (claude-haiku-4-5 list price)"``."""
    cost = estimate_cost(model, usage)
    tokens = f"{usage.input_tokens:,} input + {usage.output_tokens:,} output tokens in {usage.calls} calls"
    return f"{tokens}, cost unknown (no price listed for {model})" if cost is None else \
        f"{tokens}, about ${cost:.4f} ({model} list price)"
