"""Events: the App Home tab shows how to use Paperboy when someone opens it."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient

from bot.slack import render
from bot.slack.services import Services

log = logging.getLogger(__name__)


def register(app: App, services: Services) -> None:
    @app.event("app_home_opened")
    def home_opened(event: dict[str, Any], client: WebClient) -> None:
        # Events are acknowledged by Bolt before this runs; publishing is one quick call.
        if event.get("tab", "home") != "home" or not event.get("user"):
            return
        services.later(None, publish_home, event["user"], client)


def publish_home(user_id: str, client: WebClient) -> None:
    client.views_publish(user_id=user_id, view=render.home_view())
