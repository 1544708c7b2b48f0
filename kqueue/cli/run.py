"""`kqueue run`: the controller manager, until SIGTERM or Ctrl-C (both shut down gracefully)."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

import click

from kqueue.api import feature_gates
from kqueue.api.config import Configuration, ConfigurationError, load_configuration
from kqueue.cli.webview.server import Snapshots, serve_web_view
from kqueue.controller.collector import pace_collector
from kqueue.controller.kube import Kube, new_api_client
from kqueue.controller.manager import Manager
from kqueue.controller.ratelimit import throttle


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out)


def warn_feature_gates(config: Configuration, source: str) -> None:
    """Log, at start-up, each Kueue feature gate of the Configuration kqueue does not honour,
    and what each honoured one set against its default changes."""
    for line in feature_gates.honoured(config.feature_gates):
        logging.getLogger("kqueue").info("%s: %s", source, line)
    for line in feature_gates.warnings(config.feature_gates):
        logging.getLogger("kqueue").warning("%s: %s", source, line)


def _setup_logging(config: Configuration) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if config.logging.format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.logging.level.upper())
    # The client libraries are chatty at debug level and say nothing useful at info.
    for noisy in ("kubernetes_asyncio", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_on_signals(task: asyncio.Task[None]) -> None:
    """SIGTERM or SIGINT cancels ``task``, the graceful shutdown (the lease released, the
    events written); a signal after the first is only logged. A second cancellation would cut
    the shutdown short: Ctrl-C in a terminal reaches the whole process group, so a parent that
    forwards the signal (`make run`) delivers two, and the lease was left held for the standby
    to wait out."""
    loop = asyncio.get_running_loop()
    log = logging.getLogger("kqueue")
    stopping = False

    def stop(sig: signal.Signals) -> None:
        # A flag, not a swap of handlers: two signals read in one wake-up of the loop are both
        # dispatched to the handler registered when they were read.
        nonlocal stopping
        if stopping:
            log.info("%s: already shutting down gracefully", sig.name)
            return
        stopping = True
        log.info("%s: shutting down", sig.name)
        task.cancel()

    for sig in SHUTDOWN_SIGNALS:
        loop.add_signal_handler(sig, stop, sig)


async def _main(kubeconfig: str | None, config: Configuration) -> None:
    api = await new_api_client(kubeconfig)
    throttle(api, config.client_connection.qps, config.client_connection.burst)
    manager = Manager(api, config)
    # The read-only web view (webView.bindAddress; off by default), on the controller's client.
    web_view = await serve_web_view(Snapshots.of_cluster(Kube(api)), config.web_view.bind_address)
    task = asyncio.current_task()
    assert task is not None
    stop_on_signals(task)
    try:
        await manager.run()
    except asyncio.CancelledError:
        logging.getLogger("kqueue").info("shut down")
    finally:
        if web_view is not None:
            await web_view.cleanup()
        await api.close()


@click.command()
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    help="Kubeconfig of the cluster (default: the in-cluster service account).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Configuration file (config.kqueue.io/v1alpha1 Configuration); defaults otherwise.",
)
def run(kubeconfig: str | None, config_file: str | None) -> None:
    """Run the kqueue controller manager against a cluster."""
    try:
        if config_file:
            config = load_configuration(Path(config_file).read_text(), source=config_file)
        else:
            config = Configuration()
    except ConfigurationError as exc:
        raise click.ClickException(str(exc)) from None
    _setup_logging(config)
    warn_feature_gates(config, config_file or "defaults")
    pace_collector()
    asyncio.run(_main(kubeconfig, config))
