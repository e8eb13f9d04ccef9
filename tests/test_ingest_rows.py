"""The row an ingest writes for a paper is the same whichever path computes it: the content
hash (one sha1 over the joined parts), the JSON of the author and keyword lists (joined by
hand when nothing needs escaping) and ``authors_key`` (all ASCII names at once)."""

import json

import pytest

from bot.engine import text
from bot.engine.corpus import _json_names
from bot.engine.paper import Paper

NAMES = [
    [],
    [""],
    ["", ""],
    ["-"],
    ["A", ""],
    ["", "B"],
    ["Ada Lovelace"],
    ["Ada  Lovelace", "José García", "Łukasz Kaiser"],
    ["O'Brien, J.", "van der Berg", "ABC def", "--", "12 x"],
    ["a_b c", "a|b", "a%b"],
    ["x\x00y", "z"],
    ["\t x \n", "tab\there"],
    ['say "hi"', "back\\slash"],
    ["back\\slash", "c:\\x"],
    ['a", "b'],
    ["nbsp\u00a0here", "line\u2028sep", "\x7f"],
    [3, "not text"],
]


def _per_name_key(authors: list[str]) -> str:
    names = (" ".join(text.name_tokens(name)) for name in authors)
    return "|" + "|".join(f" {name} " for name in names if name) + "|"


@pytest.mark.parametrize("names", [n for n in NAMES if all(isinstance(x, str) for x in n)])
def test_authors_key_is_the_per_name_key(names):
    assert text.authors_key(names) == _per_name_key(names)


@pytest.mark.parametrize("names", NAMES)
def test_json_names_is_json_dumps(names):
    assert _json_names(names) == json.dumps(names, ensure_ascii=False)


def test_content_hash_is_unchanged():
    """Digests stored by earlier versions (part by part into sha1) still match, or every
    paper of a re-ingest would count as updated."""
    paper = Paper(
        "p1",
        "Attention Is All You Need",
        abstract="We propose the Transformer.",
        venue="NeurIPS",
        year=2017,
        authors=["Ashish Vaswani", "Noam Shazeer"],
        keywords=["attention"],
        url="https://x",
    )
    assert paper.content_hash() == "1bc0e74d4a856dab550dc47a2022c7c5a08739a9"
    derived = Paper("p2", "Café", title_derived=True)
    assert derived.content_hash() == "70b7ed2e665e0bbaea96930f78d2176ed7f3ebd8"
