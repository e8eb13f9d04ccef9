"""A member's reading list (the papers they saved) and its export formats: BibTeX, CSV, JSON.

No Slack here: ``/papers saved``, ``/papers export`` and ``paperboy saved`` all read the list
through :func:`reading_list` and write it with :func:`export`.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from typing import Any

from bot.engine.latex import formulas
from bot.engine.search import Engine
from bot.state import StateStore

FORMATS = ("bibtex", "csv", "json")
CSV_COLUMNS = ("id", "title", "title_derived", "authors", "venue", "year", "url", "saved_at")
#: What a spreadsheet would run as a formula when a cell starts with it (OWASP's list).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: File names and MIME-ish kinds, for uploads.
EXTENSIONS = {"bibtex": "bib", "csv": "csv", "json": "json"}


def reading_list(
    store: StateStore,
    engine: Engine,
    user_id: str,
    *,
    team_id: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """A page of the member's saved papers, newest first, each the corpus's paper with its
    ``saved_at`` (a paper since removed from the corpus keeps its id, ``missing`` set), and
    how many they saved in all."""
    rows, total = store.saved_papers(user_id, team_id=team_id, limit=limit, offset=offset)
    found = {p["id"]: p for p in engine.corpus.get_many([r["paper_id"] for r in rows])}
    papers = []
    for row in rows:
        paper = found.get(row["paper_id"]) or {"id": row["paper_id"], "missing": True}
        papers.append({**paper, "saved_at": row["saved_at"]})
    return papers, total


def export(papers: list[dict[str, Any]], fmt: str) -> str:
    """The papers as a ``bibtex``, ``csv`` or ``json`` document."""
    if fmt == "bibtex":
        return to_bibtex(papers)
    if fmt == "csv":
        return to_csv(papers)
    if fmt == "json":
        return to_json(papers)
    raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")


def to_json(papers: list[dict[str, Any]]) -> str:
    return json.dumps([_fields(p) for p in papers], ensure_ascii=False, indent=2) + "\n"


def to_csv(papers: list[dict[str, Any]]) -> str:
    """One row per paper; authors joined by "; ". A text cell a spreadsheet would run as a
    formula (a title ``=HYPERLINK(...)``) gets a leading ``'``, which shows it as text."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for paper in papers:
        row = {**_fields(paper)}
        row["authors"] = "; ".join(row["authors"])
        writer.writerow({k: _inert(v) if isinstance(v, str) else v for k, v in row.items()})
    return out.getvalue()


def _inert(cell: str) -> str:
    return "'" + cell if cell.startswith(_FORMULA_STARTS) else cell


def _fields(paper: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(paper.get("id") or ""),
        "title": paper.get("title") or "",
        "title_derived": bool(paper.get("title_derived")),  # (seed abstracts have no title)
        "authors": [str(a) for a in paper.get("authors") or []],
        "venue": paper.get("venue") or "",
        "year": paper.get("year") or "",
        "url": paper.get("url") or "",
        "saved_at": paper.get("saved_at") or "",
    }


# -- BibTeX ---------------------------------------------------------------------------------

#: LaTeX's special characters, written so that BibTeX and LaTeX read them as themselves.
_LATEX = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_SPECIAL = re.compile("|".join(re.escape(c) for c in _LATEX))


def latex_escape(text: str) -> str:
    """Text made literal in a BibTeX field (accents and other Unicode kept as they are: BibTeX
    files are UTF-8 today, biber and bibtexparser read them)."""
    return _escaped(" ".join(str(text).split()))


def _escaped(text: str) -> str:
    return _SPECIAL.sub(lambda m: _LATEX[m.group()], text)


#: The macros a title's formula may use to be kept as math in BibTeX. Titles come from feeds
#: and files nobody checked: a formula with any other macro (``\\write18``, ``\\input``,
#: ``\\def``, an author's own) is escaped like the rest, printed as written.
_MATH_MACRO_NAMES = """
    alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu
    nu xi pi varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta
    Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega mathcal mathbb mathbf mathrm mathit mathsf
    mathtt mathfrak boldsymbol bm text textrm textit textbf operatorname frac dfrac tfrac sqrt
    sum prod int oint log ln exp sin cos tan min max arg argmin argmax lim inf sup det dim
    le leq ge geq neq ne approx sim simeq cong equiv propto ll gg times cdot cdots ldots dots
    infty partial nabla in notin subset subseteq supset supseteq cup cap setminus emptyset
    to rightarrow leftarrow Rightarrow Leftarrow leftrightarrow mapsto pm mp ell hat tilde bar
    vec dot ddot widetilde widehat overline underline left right big Big bigg Bigg mid lvert
    rvert lVert rVert langle rangle top bot prime star ast circ forall exists neg land lor
    oplus otimes odot wedge vee perp parallel quad qquad"""
MATH_MACROS = frozenset(_MATH_MACRO_NAMES.split())


def _latex_title(title: str) -> str:
    """A title for BibTeX: its formulas (``Top-$k$``) kept as the authors wrote them, which
    LaTeX typesets as math, and the rest escaped (a "$5" stays a dollar). A formula is kept
    only when LaTeX can only typeset it: math macros alone (``MATH_MACROS``), its braces
    balanced (else it would end the field), no ``%``, ``#`` or ``&`` (a comment, a
    parameter, an alignment); otherwise it is escaped whole, as every title was before."""
    title = " ".join(str(title).split())
    out, at = [], 0
    for start, end in formulas(title):
        formula = title[start:end]
        if _typeset_only(formula):
            out += [_escaped(title[at:start]), formula]
            at = end
    return "".join(out) + _escaped(title[at:])


def _typeset_only(formula: str) -> bool:
    plain = re.sub(r"\\\\|\\[{}%#&$|,;:! ]", "", formula)  # escaped marks and spacing
    if any(char in plain for char in "%#&"):
        return False
    if any(m not in MATH_MACROS for m in re.findall(r"\\([A-Za-z]+)", plain)):
        return False
    if "\\" in re.sub(r"\\[A-Za-z]+", "", plain):  # a backslash before anything else
        return False
    depth = 0
    for char in plain:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def to_bibtex(papers: list[dict[str, Any]]) -> str:
    """One ``@misc`` entry per paper (``@inproceedings`` when a venue is known), keys
    unique: first author's surname, year, first title word (``vaswani2017attention``), with
    ``b``, ``c``... on collisions, given in the order the papers were saved (``saved_at``),
    so that saving another paper never changes the key an earlier export gave (a ``\\cite``
    in someone's draft)."""
    used: set[str] = set()
    keys: dict[int, str] = {}
    by_saving = sorted(range(len(papers)), key=lambda n: str(papers[n].get("saved_at") or ""))
    for n in by_saving:  # (a stable sort: papers not saved keep their order)
        keys[n] = _unique(_key(papers[n]), used)
    entries = []
    for n, paper in enumerate(papers):
        key = keys[n]
        fields: list[tuple[str, str]] = []
        if paper.get("title"):
            fields.append(("title", "{" + _latex_title(paper["title"]) + "}"))
        authors = [latex_escape(a) for a in paper.get("authors") or [] if str(a).strip()]
        if authors:
            fields.append(("author", " and ".join(authors)))
        if paper.get("venue"):
            fields.append(("booktitle", latex_escape(paper["venue"])))
        if paper.get("year"):
            fields.append(("year", str(paper["year"])))
        if paper.get("url"):
            # Read verbatim by the url package: only braces must not unbalance the field.
            url = " ".join(str(paper["url"]).split()).replace("{", "%7B").replace("}", "%7D")
            fields.append(("url", url))
        fields.append(("note", "Paperboy id: " + latex_escape(str(paper.get("id") or ""))))
        if paper.get("title_derived"):  # (annote: BibTeX's field that styles do not print)
            fields.append(("annote", "Title derived from the abstract by Paperboy"))
        kind = "inproceedings" if paper.get("venue") else "misc"
        body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
        entries.append(f"@{kind}{{{key},\n{body}\n}}\n")
    return "\n".join(entries)


def _ascii_word(text: str) -> str:
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]", "", plain.lower())


_STOP = frozenset({"a", "an", "the", "on", "of", "for", "in", "to", "and", "with", "towards"})


def _key(paper: dict[str, Any]) -> str:
    authors = [str(a) for a in paper.get("authors") or [] if str(a).strip()]
    surname = _ascii_word(authors[0].split(",")[0].split()[-1]) if authors else ""
    words = [_ascii_word(w) for w in str(paper.get("title") or "").split()]
    word = next((w for w in words if w and w not in _STOP), "")
    key = f"{surname}{paper.get('year') or ''}{word}"
    return key or "paper" + _ascii_word(str(paper.get("id") or ""))[:20] or "paper"


def _unique(key: str, used: set[str]) -> str:
    candidate, n = key, 0
    while candidate in used:
        n += 1
        candidate = key + _suffix(n + 1)  # the second is "b", as in 2017a, 2017b
    used.add(candidate)
    return candidate


def _suffix(n: int) -> str:
    letters = ""
    while n > 0:
        n, rest = divmod(n - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters
