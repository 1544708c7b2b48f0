"""kqueue.engine: the pure admission engine.

Synchronous and deterministic: no asyncio, no Kubernetes client, no metrics library. The clock is
injected, so the controller and `kqueue simulate` drive exactly the same rules.
"""
