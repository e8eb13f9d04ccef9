"""Inline LaTeX math made readable for display: ``$\\mathcal{O}(k)$-time`` -> ``𝒪(k)-time``.

arXiv titles and abstracts keep their math as LaTeX (4% of the benchmark corpus's
abstracts), which Slack and a terminal show raw. Only what lies between ``$`` signs is
converted, by pylatexenc (the converter bibtexparser uses), so the rest of the text (a
``95%``, a price) is never read as LaTeX; a formula pylatexenc cannot read stays as written.
The stored paper is not changed: this is for showing it, and the index reads the LaTeX itself
(``text.words``).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence

# A formula: between ``$`` or ``$$`` signs on one line (an abstract's lone "$" must not pair
# with one paragraphs later); ``\$`` is an escaped dollar, never a sign. ``formulas`` then
# keeps those pandoc would read as math (no space inside either sign, no digit right after
# the closing one, so "$5 and $10" stays money), and those with TeX's own marks in them,
# which abstracts write as "$ k \ge \sqrt{2n}$" too.
_CANDIDATE = re.compile(r"(?<!\\)(\$\$?)((?:[^$\\\n]|\\.)+?)(?<!\\)\1")
_TEX_MARKS = re.compile(r"[\\^_{]")


def formulas(text: str) -> list[tuple[int, int]]:
    """Where ``text``'s formulas are, as (start, end) offsets. A pair of signs that is not
    one ("$5 and $") leaves its second sign free to open the next ("$\\alpha$")."""
    spans = []
    at = 0
    while match := _CANDIDATE.search(text, at):
        body = match.group(2)
        after = text[match.end() : match.end() + 1]
        plain = body == body.strip() and not after.isdigit()
        if body.strip() and (plain or _TEX_MARKS.search(body)):
            spans.append(match.span())
            at = match.end()
        else:
            at = match.end(2)  # the closing sign
    return spans


def readable(text: str) -> str:
    """``text`` with each inline formula converted to Unicode (see the module's docstring)."""
    if "$" not in text:
        return text
    out, at = [], 0
    for start, end in formulas(text):
        out += [text[at:start], _converted(text[start:end])]
        at = end
    return "".join(out) + text[at:]


def readable_pieces(pieces: Sequence[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """A snippet's ``(piece, matched)`` pairs with their formulas converted. A formula that
    spans pieces (a matched word inside it) becomes one piece, matched if any part was."""
    text = "".join(piece for piece, _ in pieces)
    if "$" not in text:
        return list(pieces)
    spans = formulas(text)
    if not spans:
        return list(pieces)
    out: list[tuple[str, bool]] = []
    at = 0  # where the current piece starts in ``text``
    formula = 0
    for piece, matched in pieces:
        start, end = at, at + len(piece)
        at = end
        while start < end:
            while formula < len(spans) and spans[formula][1] <= start:
                formula += 1
            if formula == len(spans) or spans[formula][0] >= end:
                out.append((text[start:end], matched))  # no formula in the rest of the piece
                break
            f_start, f_end = spans[formula]
            if f_start > start:
                out.append((text[start:f_start], matched))
                start = f_start
            if start == f_start:  # the formula begins here: it takes all it spans
                out.append((_converted(text[f_start:f_end]), matched))
            elif matched and out:  # the rest of a formula begun in an earlier piece
                out[-1] = (out[-1][0], True)
            start = min(end, f_end)
    return out


@functools.lru_cache(maxsize=4096)
def _converted(formula: str) -> str:
    """One ``$...$`` formula in Unicode, or as written when pylatexenc cannot read it."""
    body = formula.strip("$")
    # Inside math a bare % would start a TeX comment (and drop the rest); \| is a norm's
    # bar, which pylatexenc drops.
    body = re.sub(r"(?<!\\)%", r"\\%", body).replace(r"\|", "‖")
    converter, known = _converter()
    if any(m not in known and m not in _DROPPABLE for m in _MACRO.findall(body)):
        return formula  # an author's own macro (\eps, \bx): dropping it would lose meaning
    try:
        converted = converter.latex_to_text(f"${body}$")  # (in math, spaces are kept)
    except Exception:  # noqa: BLE001 (pylatexenc fails on some markup: IndexError on \href)
        return formula
    converted = " ".join(converted.split())
    return converted or formula


_MACRO = re.compile(r"\\([A-Za-z]+)")
#: Macros pylatexenc does not know that only size, space or name what follows: dropped, the
#: formula reads the same (``\left( x \right)`` -> ``( x )``).
_DROPPABLE = frozenset(
    {"left", "right", "middle", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr"}
    | {"displaystyle", "textstyle", "scriptstyle", "limits", "nolimits"}
    | {"operatorname", "mathop", "boldsymbol", "bm"}
)


@functools.cache
def _converter():
    """pylatexenc's converter and the macros it knows, imported on first use (a lookup
    without math never pays)."""
    from pylatexenc.latex2text import LatexNodes2Text, get_default_latex_context_db

    # It logs a warning for each macro it cannot expand; the formula then stays as written.
    logging.getLogger("pylatexenc").setLevel(logging.ERROR)
    db = get_default_latex_context_db()
    known = frozenset(spec.macroname for spec in db.iter_macro_specs())
    return LatexNodes2Text(latex_context=db, math_mode="text"), known
