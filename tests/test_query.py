import pytest

from bot.engine.query import MAX_QUERY_CHARS, QueryError, parse_query, parse_topic


def test_words_phrases_exclusions_and_filters():
    q = parse_query(
        'diffusion "score matching" -survey -"large language" venue:ICLR year:2023-2025 '
        'author:"Jane Doe"'
    )
    assert q.words == ["diffusion"]
    assert q.phrases == ["score matching"]
    assert q.excluded == ["survey", "large language"]
    assert q.venues == ["ICLR"]
    assert (q.year_from, q.year_to) == (2023, 2025)
    assert q.authors == ["Jane Doe"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("year:2025", (2025, 2025)),
        ("year:2023-", (2023, None)),
        ("year:-2020", (None, 2020)),
        ("year:2025-2023", (2023, 2025)),
    ],
)
def test_year_forms(text, expected):
    q = parse_query(text)
    assert (q.year_from, q.year_to) == expected


@pytest.mark.parametrize(
    "text",
    ["venue:", "author: x", "year:last", "-venue:ICLR", "x" * (MAX_QUERY_CHARS + 1)],
)
def test_unusable_queries_raise_a_friendly_error(text):
    with pytest.raises(QueryError) as info:
        parse_query(text)
    assert len(str(info.value)) > 20


def test_urls_are_words_not_filters():
    assert parse_query("https://arxiv.org/abs/1234").words == ["https://arxiv.org/abs/1234"]


def test_a_name_that_is_no_filter_is_words_in_a_lookup_and_refused_in_a_topic():
    q = parse_query('cf. arXiv:2501.01234 -re:old note:"two words"')
    assert q.words == ["cf.", "arXiv:2501.01234", "note"] and q.phrases == ["two words"]
    assert q.excluded == ["re:old"] and q.not_filters == ["arXiv", "re", "note"]
    with pytest.raises(QueryError, match="I don't know the filter `arXiv:`"):
        parse_topic("arXiv:2501.01234 diffusion")
    assert parse_topic("diffusion venue:ICLR").venues == ["ICLR"]


def test_unterminated_quote_is_a_phrase():
    assert parse_query('"graph neural').phrases == ["graph neural"]


def test_a_pasted_title_with_a_colon_is_text_not_a_filter():
    assert parse_query("QLASS: Q-guided Search").words == ["QLASS", "Q-guided", "Search"]


def test_control_characters_and_colour_codes_are_not_searched() -> None:
    """A line copied from a coloured terminal: the words, not ``[31mdiffusion``."""
    q = parse_query("\x1b[31mdiffusion\x1b[0m models\x07")
    assert q.words == ["diffusion", "models"] and q.text == "diffusion  models"


def test_two_year_filters_are_refused_rather_than_one_silently_kept() -> None:
    with pytest.raises(QueryError, match="Give one `year:` filter"):
        parse_query("gnn year:2024 year:2023")
    assert (parse_query("gnn year:2023-2024").year_from, parse_query("year:2023-").year_to) == (
        2023,
        None,
    )
