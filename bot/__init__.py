"""Paperboy: a Slack bot that finds ML papers and sends each member a daily digest."""

__version__ = "0.1.0"
