"""Generate: grounded answers with page citations from Claude or OpenAI (extractive without a key),
citation checks, golden-question prompts and token costs. The LLM client itself is ``rag_core.llm``."""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "answer_question": "answer", "Answer": "answer", "AnswerMode": "answer",
    "check_citations": "citations", "question_prompt": "question_writer", "estimate_cost": "cost",
})
