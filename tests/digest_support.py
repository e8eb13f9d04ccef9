"""Test helpers for the digest: a small corpus with clear topics, and a clock to move by hand.

Used by the test-suite (``tests/test_digest_*.py``); not part of the installed package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: (topic words, venue, further words) -> papers that are mostly about that topic.
_THEMES = {
    "graph": (
        "Graph Neural Networks",
        "ICLR",
        ["message passing", "node classification", "molecular graphs", "over-smoothing"],
    ),
    "diffusion": (
        "Diffusion Models",
        "NeurIPS",
        ["score matching", "image generation", "denoising", "sampling steps"],
    ),
    "rl": (
        "Reinforcement Learning",
        "ICML",
        ["policy gradient", "exploration", "reward shaping", "offline data"],
    ),
    "federated": (
        "Federated Learning",
        "ICLR",
        ["client drift", "communication rounds", "privacy", "heterogeneous clients"],
    ),
    "protein": (
        "Protein Design",
        "NeurIPS",
        ["protein folding", "structure prediction", "amino acid sequences", "binding"],
    ),
}


# Many distinct words make the overview's vector long, so a passing mention scores low.
_FILLER = (
    "Topics included calibration, drift, labelling, annotation, auditing, fairness, latency, "
    "throughput, caching, sharding, quantisation, distillation, pruning, compilation, kernels, "
    "schedulers, retries, monitoring, dashboards, alerting, rollbacks, canaries, budgets, "
    "hiring, onboarding, documentation, governance, procurement, licensing, archiving, "
    "backups, encryption, tokenisation, stemming, lemmatisation, parsing, tagging, chunking, "
    "clustering, ranking, retrieval, summarisation, captioning, segmentation, tracking, "
    "odometry, grasping, locomotion, navigation, weather, traffic, energy, retail, logistics. "
) + " ".join(
    a + b
    for a in ("ka", "lo", "mi", "nu", "pe", "ra", "si", "tu")
    for b in ("ban", "cor", "dex", "fin", "gol", "hut", "jin", "kel", "mor", "vat")
)


def synthetic_papers(per_theme: int = 8) -> list[dict[str, Any]]:
    """``per_theme`` papers for each theme, a survey of each (for ``-survey`` tests), and one
    overview that mentions two topics only in passing (below the match threshold)."""
    papers = []
    for key, (name, venue, extras) in _THEMES.items():
        for n in range(per_theme):
            extra = extras[n % len(extras)]
            papers.append(
                {
                    "id": f"{key}-{n}",
                    "title": f"{name} with {extra.title()} ({n})",
                    "abstract": (
                        f"We study {name.lower()} and {extra}. Our method for {name.lower()} "
                        f"improves {extra} on standard benchmarks, variant {n}."
                    ),
                    "authors": [f"Author {key.title()} {n}", "Shared Author"],
                    "venue": venue,
                    "year": 2020 + n % 6,
                    "url": f"https://example.org/{key}/{n}",
                }
            )
        papers.append(
            {
                "id": f"{key}-survey",
                "title": f"A Survey of {name}",
                "abstract": f"This survey reviews {name.lower()}: {', '.join(extras)}.",
                "authors": ["Survey Writer"],
                "venue": venue,
                "year": 2024,
            }
        )
    papers.append(
        {
            "id": "misc-overview",
            "title": "Lessons From a Decade of Applied Machine Learning",
            "abstract": (
                "We collect lessons from deploying vision, speech, robotics, recommendation, "
                "forecasting, search, translation, tabular prediction, anomaly detection and "
                "evaluation pipelines, with a brief remark on privacy and one on graph neural "
                "networks, across hospitals, factories, banks, farms and newsrooms. " + _FILLER
            ),
            "authors": ["Generalist Writer"],
            "venue": "ICML",
            "year": 2023,
        }
    )
    return papers


def write_corpus(path: Path, papers: list[dict[str, Any]] | None = None) -> Path:
    """Write papers (default: ``synthetic_papers()``) as JSON Lines for ``Engine.ingest``."""
    path = Path(path)
    papers = synthetic_papers() if papers is None else papers
    path.write_text("\n".join(json.dumps(p) for p in papers) + "\n")
    return path


@dataclass
class ManualClock:
    """Now, as far as the code under test knows: moved only by the test."""

    now: datetime = datetime(2024, 3, 4, 7, 0, tzinfo=UTC)  # a Monday

    def __call__(self) -> datetime:
        return self.now

    def timestamp(self) -> float:
        """For ``FakeSlack(clock=...)``, which wants epoch seconds."""
        return self.now.timestamp()
