"""Benchmarks for Paperboy: retrieval quality and search speed against off-the-shelf engines.

Nothing in the app or the tests imports this package; it reads the shared corpus files that
live beside the checkout (see ``bench/corpora.py``) and writes scratch output to ``bench/work/``.
"""
