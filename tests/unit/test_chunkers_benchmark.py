"""benchmarks/chunkers.py: the rule that chose the shipped chunker (best size per chunker, then better / worse /
tie against the baseline) on tiny comparisons worked out by hand (no process, no model)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "chunkers.py"
sys.path.insert(0, str(SCRIPT.parent))
spec = importlib.util.spec_from_file_location("chunkers_benchmark", SCRIPT)
chunkers_benchmark = importlib.util.module_from_spec(spec)
sys.modules["chunkers_benchmark"] = chunkers_benchmark
spec.loader.exec_module(chunkers_benchmark)

PRIMARY = "evidence/recall@1024"


def comparison(candidate: str, difference: float, p: float) -> dict:
    return {"baseline": "recursive:512", "candidate": candidate,
            "paired": {PRIMARY: {"difference": difference, "p_ttest": p}}}


def test_better_needs_the_holm_corrected_p_and_worse_only_the_uncorrected_one():
    found = [comparison("a:128", +0.17, 0.008), comparison("b:128", +0.10, 0.02), comparison("c:256", -0.19, 0.017),
             comparison("d:512", -0.01, 0.9)]
    chunkers_benchmark.verdicts(found, PRIMARY)
    # Holm over 4: sorted p 0.008, 0.017, 0.02, 0.9 -> 0.032, 0.051, max(0.051, 0.04) = 0.051, 0.9
    assert [c["p_holm"] for c in found] == [0.032, 0.051, 0.051, 0.9]
    # a: better (0.032 < 0.05); b: +0.10 at p 0.02 but 0.051 corrected: a tie; c: -0.19 at p 0.017: worse, although
    # its corrected p (0.051) would call it a tie; d: a tie
    assert [c["verdict"] for c in found] == ["better", "tie", "worse", "tie"]


def test_a_chunkers_best_size_is_its_best_mean_the_smaller_on_a_tie():
    runs = {f"{chunker}:{size}": {"chunker": chunker, "metrics": {PRIMARY: {"mean": mean}}}
            for chunker, size, mean in (("recursive", 128, 0.80), ("recursive", 512, 0.85), ("fixed", 128, 0.90),
                                        ("fixed", 256, 0.90), ("fixed", 512, 0.70))}
    assert chunkers_benchmark.best_sizes(runs, PRIMARY) == {"recursive": "recursive:512", "fixed": "fixed:128"}


def test_overlap_is_an_eighth_of_the_size_only_where_the_chunker_reads_it():
    assert chunkers_benchmark.overlap_for("recursive", 512) == 64
    assert chunkers_benchmark.overlap_for("sentences", 128) == 16
    assert chunkers_benchmark.overlap_for("semantic", 512) == 0 and chunkers_benchmark.overlap_for("cluster", 256) == 0
