"""A TCP proxy that cuts connections, as a flaky load balancer in front of the API server does.

:class:`CutProxy` forwards bytes unchanged (TLS passes through: the client still verifies the
API server's own certificate) and aborts each connection after a random lifetime, drawn from an
exponential distribution: watches are cut mid-stream, and so are requests in flight, including
writes whose answer is then lost although the API server may have committed them. During a
:meth:`~CutProxy.blackout` every open connection is cut and new ones are aborted as soon as they
are accepted, as a load balancer with no healthy backend does.

Load-balancer idle timeouts, API server rolling restarts and HTTP/2 GOAWAY all end connections
this way on real clusters; unlike ``FaultProxy`` (faults.py), which answers with HTTP errors,
this one never answers at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

_CHUNK = 64 * 1024


@dataclass
class CutProxy:
    """Forward 127.0.0.1:``port`` to ``upstream`` (``https://host:port``), cutting connections.

    ``mean_lifetime``: mean seconds a connection lives before it is cut (0: never cut).
    """

    upstream: str
    mean_lifetime: float = 3.0
    seed: int = 1
    port: int = 0
    connections: int = 0
    cuts: int = 0
    refused: int = 0
    blackouts: int = 0
    dark_seconds: float = 0.0
    _dark_until: float = 0.0
    _live: set[asyncio.Task[None]] = field(default_factory=set)
    _server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._rng = random.Random(self.seed)
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._live):
            task.cancel()
        await asyncio.gather(*self._live, return_exceptions=True)

    @property
    def dark(self) -> bool:
        return time.monotonic() < self._dark_until

    async def blackout(self, seconds: float) -> None:
        """Cut every connection and refuse new ones for ``seconds``."""
        self.blackouts += 1
        self.dark_seconds += seconds
        self._dark_until = time.monotonic() + seconds
        for task in list(self._live):
            task.cancel()
        await asyncio.sleep(seconds)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.dark:
            self.refused += 1
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._live.add(task)
        self.connections += 1
        lifetime = self._rng.expovariate(1 / self.mean_lifetime) if self.mean_lifetime else None
        up = urlsplit(self.upstream)
        try:
            up_reader, up_writer = await asyncio.open_connection(up.hostname, up.port)
        except OSError:
            writer.transport.abort()
            self._live.discard(task)
            return
        pumps = [
            asyncio.create_task(_pump(reader, up_writer)),
            asyncio.create_task(_pump(up_reader, writer)),
        ]
        cut = False
        try:
            done, _ = await asyncio.wait(
                pumps, timeout=lifetime, return_when=asyncio.FIRST_COMPLETED
            )
            cut = not done
        except asyncio.CancelledError:
            cut = True  # a blackout, or the proxy stopping
        finally:
            for p in pumps:
                p.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            # abort(): no TLS close_notify, no FIN handshake to wait for: the peer sees the
            # connection die, as when a load balancer drops it.
            writer.transport.abort()
            up_writer.transport.abort()
            if cut:
                self.cuts += 1
            self._live.discard(task)


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while True:
            data = await src.read(_CHUNK)
            if not data:
                return
            dst.write(data)
            await dst.drain()
