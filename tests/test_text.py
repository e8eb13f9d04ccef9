from bot.engine.text import analyze, words


def test_latex_hyphens_and_accents():
    assert words("generalized $(L_0,L_1)$-smoothness") == ["generalized", "l0", "l1", "smoothness"]
    assert words("Polyak-Łojasiewicz condition") == ["polyak", "lojasiewicz", "condition"]
    assert words("Schrödinger bridges") == words("schrodinger bridge")


def test_acronyms_and_plurals_fold_to_one_term():
    assert words("QLASS") == ["qlass"]
    assert words("graph neural networks") == words("Graph Neural Network")


def test_stop_words_dropped_and_bigrams_added():
    assert analyze("the self-attention of transformers") == [
        "self",
        "attention",
        "transformer",
        "self attention",
        "attention transformer",
    ]


def test_stop_words_are_scikit_learns():
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as SKLEARN

    from bot.engine.text import ENGLISH_STOP_WORDS

    assert ENGLISH_STOP_WORDS == SKLEARN
