"""The seed corpus a fresh database is filled from (the embedded default).

This folder is installed as the package ``bot.seeds`` (see pyproject.toml), so an installed
Paperboy finds it with ``importlib.resources`` wherever it lives; the paper files are the
package's data. Any file here other than this one is read as a corpus file.
"""
