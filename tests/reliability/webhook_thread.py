"""kqueue's real webhook server on its own event loop in a thread.

The API server (or a test's plain HTTP client) calls it while the test's own loop is busy or
while a synchronous test (hypothesis) runs.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from kqueue.controller.webhook_server import WebhookServer
from kqueue.controller.webhooks import register


class ThreadedWebhookServer:
    """The real webhook server with the real handlers, served from a background thread."""

    def __init__(self, cert_dir: Path) -> None:
        self.server = WebhookServer(cert_dir=cert_dir, host="127.0.0.1", port=0)
        register(self.server)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(timeout=30)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()
