"""Slack listeners, one module per surface (Bolt starter template layout).

``commands`` answers ``/papers``, ``actions`` the buttons, ``views`` the modals' submissions,
``events`` the App Home, ``subscriptions`` the topic and digest subcommands of ``/papers``
(handed over by ``commands``). Each surface has a ``register(app, services)``. A listener is
small: ack, parse the payload, call the engine or the digest package, render, reply
(``bot.slack.replies.reply``).
"""

from __future__ import annotations

from slack_bolt import App

from bot.slack.services import Services

from . import actions, commands, events, views


def register(app: App, services: Services) -> None:
    commands.register(app, services)
    actions.register(app, services)
    views.register(app, services)
    events.register(app, services)
