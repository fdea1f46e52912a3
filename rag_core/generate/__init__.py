"""Generate: grounded answers with page citations from Claude or OpenAI (extractive without a key),
the LLM client with its errors and retries, and citation checks."""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "answer_question": "answer", "Answer": "answer", "LLMClient": "llm", "LLMError": "llm",
    "check_citations": "citations", "question_prompt": "question_writer", "estimate_cost": "cost",
})
