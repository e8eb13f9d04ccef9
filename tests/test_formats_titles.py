"""Titles made up from abstracts, and emphasis taken out (``bot/engine/formats/titles.py``)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from bot.engine.formats import (
    derive_title,
    read_corpus_file,
    strip_emphasis,
)
from tests.formats_support import DATA, seed_paragraphs


def test_derive_title_named_method_with_expansion() -> None:
    qlass = seed_paragraphs(DATA / "icml2025.txt")[0]

    assert derive_title(qlass) == "QLASS: Q-guided Language Agent Stepwise Search"


def test_derive_title_named_method_with_appositive_is_shortened() -> None:
    celcomen = seed_paragraphs(DATA / "iclr2025.txt")[1]
    title = derive_title(celcomen)

    assert title.startswith("Celcomen: a novel generative graph neural network")
    assert title.endswith("…")
    assert len(title) <= 100


@pytest.mark.parametrize(
    ("abstract", "expected"),
    [
        (
            "Graphs are common. We introduce the Joint Embedding Predictive Transformer (JEPT) "
            "to learn a policy.",
            "JEPT: Joint Embedding Predictive Transformer",
        ),
        (
            "Unlearning matters. We introduce a new graph unlearning method,**Cognac**, which "
            "can unlearn the effect of a manipulation set.",
            "Cognac: a new graph unlearning method",
        ),
        (
            'We introduce the "Belief State Transformer", a next-token predictor.',
            "Belief State Transformer: a next-token predictor",
        ),
        (
            "Then, we introduce *EffOrt*, a methodology that modifies the learning step.",
            "EffOrt: a methodology that modifies the learning step",
        ),
    ],
)
def test_derive_title_named_method_variants(abstract: str, expected: str) -> None:
    assert derive_title(abstract) == expected


def test_derive_title_ignores_common_acronyms_of_the_problem() -> None:
    abstract = (
        "Scaling laws guide training. We propose a method for Large Language Models (LLMs) "
        "that predicts loss curves."
    )

    assert derive_title(abstract) == "Scaling laws guide training"


def test_derive_title_first_sentence_does_not_split_at_initials_or_et_al() -> None:
    abstract = "This is hard, as shown by A. Smith et al. in prior work. Here is more."

    assert derive_title(abstract) == "This is hard, as shown by A. Smith et al. in prior work"


def test_derive_title_strips_markdown_emphasis() -> None:
    abstract = (
        "Streams need *continual learning* (CL) and **fast** updates. We study them in depth "
        "with several experiments."
    )

    assert derive_title(abstract) == "Streams need continual learning (CL) and fast updates"


def test_seed_abstracts_lose_markdown_emphasis_but_keep_ids_and_named_titles(
    tmp_path: Path,
) -> None:
    abstract = (
        "Image utility matters. We introduce a new engagement model, **EngageNet**, trained on "
        "*EngagingImageNet*; data are not *i.i.d.* and we term this **cross capabilities**, "
        "an _open_ problem, for $x^*$ and $y^*$ with $(L_0,L_1)$ bounds (see my_repo)."
    )
    path = tmp_path / "seed.txt"
    path.write_text(f"ICML 2025 Papers\n\n{abstract}\n", encoding="utf-8")

    [paper] = read_corpus_file(path).papers

    assert paper.abstract == (
        "Image utility matters. We introduce a new engagement model, EngageNet, trained on "
        "EngagingImageNet; data are not i.i.d. and we term this cross capabilities, "
        "an open problem, for $x^*$ and $y^*$ with $(L_0,L_1)$ bounds (see my_repo)."
    )
    assert paper.title.startswith("EngageNet: ")  # found by its ** markers, before stripping
    # The id hashes the abstract as written, so databases made before keep their ids.
    assert paper.id == "icml2025-" + hashlib.sha1(abstract.encode()).hexdigest()[:12]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*EngageNet*-based rewards", "EngageNet-based rewards"),
        ("ImageReward, *etc.* are", "ImageReward, etc. are"),
        ("a _really_ good idea", "a really good idea"),
        ("a __Strong claim__ here", "a Strong claim here"),
        ("$x^*$ and $y^*$", "$x^*$ and $y^*$"),
        ("2*3*4 and a * b * c", "2*3*4 and a * b * c"),
        ("$\\text{AP}_{50}$ and x_i, y_j", "$\\text{AP}_{50}$ and x_i, y_j"),
        (
            "the __init__ method of proactive_t2i_agents",
            "the __init__ method of proactive_t2i_agents",
        ),
        ("``Law of the Weakest Link,''", "``Law of the Weakest Link,''"),
    ],
)
def test_strip_emphasis_only_where_it_clearly_is_emphasis(text: str, expected: str) -> None:
    assert strip_emphasis(text) == expected


@pytest.mark.parametrize("name", ["icml2025.txt", "iclr2025.txt"])
def test_real_seed_abstracts_carry_no_markdown_emphasis(name: str) -> None:
    for paper in read_corpus_file(DATA / name).papers:
        assert not re.search(r"\*\S|\S\*", paper.abstract), paper.abstract


def test_derive_title_keeps_latex_intact() -> None:
    abstract = "We bound the $(L_0,L_1)$-smoothness constant of deep networks. More follows."

    assert derive_title(abstract) == "We bound the $(L_0,L_1)$-smoothness constant of deep networks"


def test_derive_title_cuts_long_sentence_at_a_word_boundary() -> None:
    words = "representation learning with very many carefully chosen words " * 4
    abstract = f"Modern {words.strip()}. Second sentence."
    title = derive_title(abstract)
    stem = title.removesuffix("…")

    assert title.endswith("…")
    assert len(title) <= 100
    assert abstract.startswith(stem)
    assert abstract[len(stem)] == " "


def test_derive_title_of_nothing_is_not_empty() -> None:
    assert derive_title("   ") == "Untitled"
