"""Paperboy: a Slack bot that finds ML papers and sends each member a daily digest."""

from bot.numpy_defaults import set_numpy_defaults

__version__ = "0.1.0"

set_numpy_defaults()  # before any module of the package imports numpy
