"""HTTPS serving for the secure metrics and visibility servers.

A server's certificate comes from a directory (``tls.crt``, ``tls.key``: a Secret mounted by
cert-manager or by hand), or, when none is configured, is made at start: a throwaway CA and a
certificate it signs for the names the server answers to. The self-signed case is what
controller-runtime does for its secure metrics server and Kueue's visibility server does for
its APIService (``insecureSkipTLSVerify``): the caller authenticates to kqueue, not the other
way round, until a real certificate is configured.

A server that authenticates callers by client certificate (the kube-apiserver's front proxy)
passes the CA to trust: the TLS handshake then asks for a certificate, verifies it when one is
sent and still accepts callers without one (they may bring a bearer token instead).
"""

from __future__ import annotations

import logging
import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from kqueue.api.config import parse_bind_address
from kqueue.controller.webhook_server.certs import TLS_CERT, TLS_KEY, generate_bundle

logger = logging.getLogger(__name__)


def tls_context(
    cert_dir: str, hosts: Sequence[str], *, client_ca_pem: bytes | None = None
) -> ssl.SSLContext:
    """The server's TLS context: ``cert_dir``'s certificate, or a self-signed one for ``hosts``.

    ``client_ca_pem``: verify client certificates against these CAs (optional for the client).
    """
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_dir:
        directory = Path(cert_dir)
        missing = [n for n in (TLS_CERT, TLS_KEY) if not (directory / n).exists()]
        if missing:
            raise FileNotFoundError(f"certDir {cert_dir}: missing {', '.join(missing)}")
        ctx.load_cert_chain(str(directory / TLS_CERT), str(directory / TLS_KEY))
    else:
        bundle = generate_bundle(list(hosts))
        # ssl loads keys from files only: write them where only this process can read, load,
        # and let the directory go.
        with tempfile.TemporaryDirectory(prefix="kqueue-tls-") as tmp:
            cert, key = Path(tmp) / TLS_CERT, Path(tmp) / TLS_KEY
            cert.write_bytes(bundle.cert_pem)
            key.write_bytes(bundle.key_pem)
            key.chmod(0o600)
            ctx.load_cert_chain(str(cert), str(key))
    if client_ca_pem:
        ctx.load_verify_locations(cadata=client_ca_pem.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def serve_tls(
    app: web.Application, bind_address: str, ctx: ssl.SSLContext
) -> web.AppRunner | None:
    """Serve ``app`` over HTTPS on ``bind_address``; None when it is ``"0"`` (disabled)."""
    parsed = parse_bind_address(bind_address)
    if parsed is None:
        return None
    host, port = parsed
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or None, port, ssl_context=ctx).start()
    logger.info(
        "serving %s over HTTPS on %s",
        sorted(r.canonical for r in app.router.resources()),
        runner.addresses,
    )
    return runner
