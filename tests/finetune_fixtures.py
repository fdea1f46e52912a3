"""Tiny data and a tiny model for the fine-tuning tests.

``write_topic_beir``: a BEIR folder of 12 short documents in 3 topics (4 each); each document has a
keyword of its own, and each query names one keyword and its topic, so BM25 ranks the relevant
document first and the topic's other three right after it (hard negatives). ``tiny_bert``: a 2-layer,
32-wide BERT with random weights and the packaged MiniLM's tokenizer: real code paths (training,
saving, loading, ONNX export) in seconds; its scores mean nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TOPICS = ("river bank water flow current", "engine fuel piston power cylinder", "violin string music bow concert")
KEYWORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima")


def write_topic_beir(folder: Path, test_queries: int = 3) -> Path:
    """corpus.jsonl, queries.jsonl, qrels/train.tsv (the first 12 - test_queries queries) and qrels/test.tsv."""
    (folder / "qrels").mkdir(parents=True)
    documents, queries = [], []
    for number, keyword in enumerate(KEYWORDS):
        topic = TOPICS[number // 4]
        documents.append({"_id": f"d{number}", "title": f"{keyword} notes",
                          "text": f"{keyword} {topic}. The {keyword} report covers {topic} in detail."})
        queries.append({"_id": f"q{number}", "text": f"What does the {keyword} report say about {topic.split()[0]}?"})
    (folder / "corpus.jsonl").write_text("".join(json.dumps(item) + "\n" for item in documents))
    (folder / "queries.jsonl").write_text("".join(json.dumps(item) + "\n" for item in queries))
    train = len(KEYWORDS) - test_queries
    for split, numbers in (("train", range(train)), ("test", range(train, len(KEYWORDS)))):
        rows = "".join(f"q{number}\td{number}\t1\n" for number in numbers)
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


def save_tiny_bert(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from rag_core.retrieve.models import packaged_minilm_dir

    tokenizer = AutoTokenizer.from_pretrained(str(packaged_minilm_dir()))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def topic_beir(tmp_path_factory) -> Path:
    return write_topic_beir(tmp_path_factory.mktemp("topic-beir"))


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))
