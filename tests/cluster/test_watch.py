"""Watches against the real API server: resourceVersions, 410 Gone, and an API server restart."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import aiohttp
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from kqueue.localcluster.cluster import LocalCluster

pytestmark = pytest.mark.cluster


@dataclass
class Reflector:
    """List, then watch from the list's resourceVersion; resume after a broken stream and
    list again on 410 Gone. The pattern kqueue's informers follow, reduced to names."""

    core: client.CoreV1Api
    namespace: str
    names: set[str] = field(default_factory=set)
    lists: int = 0
    broken_streams: int = 0
    gone: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        rv: str | None = None
        while True:
            try:
                if rv is None:
                    listed = await self.core.list_namespaced_config_map(self.namespace)
                    self.names = {cm.metadata.name for cm in listed.items}
                    self.lists += 1
                    self.changed.set()
                    rv = listed.metadata.resource_version
                w = watch.Watch()
                async with w:
                    async for event in w.stream(
                        self.core.list_namespaced_config_map,
                        self.namespace,
                        resource_version=rv,
                        allow_watch_bookmarks=True,
                        timeout_seconds=300,
                    ):
                        obj = event["object"]
                        if event["type"] == "DELETED":
                            self.names.discard(obj.metadata.name)
                        elif event["type"] in ("ADDED", "MODIFIED"):
                            self.names.add(obj.metadata.name)
                        rv = w.resource_version
                        self.changed.set()
            except ApiException as exc:
                if exc.status == 410:
                    self.gone += 1
                    rv = None
                else:
                    self.broken_streams += 1
                    await asyncio.sleep(0.2)
            except (TimeoutError, aiohttp.ClientError, ConnectionError):
                # the API server went away mid-stream (or refused the reconnect): retry
                self.broken_streams += 1
                await asyncio.sleep(0.2)

    async def wait_for(self, name: str, within: float = 30) -> None:
        async def seen() -> None:
            while name not in self.names:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(seen(), within)


async def test_watch_survives_api_server_restart(
    cluster: LocalCluster, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="before-start"))
    )
    reflector = Reflector(core, namespace)
    task = asyncio.create_task(reflector.run())
    try:
        await reflector.wait_for("before-start")
        old_rv = (await core.list_namespaced_config_map(namespace)).metadata.resource_version
        await core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="before-restart"))
        )
        await reflector.wait_for("before-restart")
        assert reflector.lists == 1

        # Runs in a thread so the event loop keeps serving the watch (and its errors).
        await asyncio.to_thread(cluster.restart_apiserver)

        await core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="after-restart"))
        )
        await reflector.wait_for("after-restart")
        assert reflector.names >= {"before-start", "before-restart", "after-restart"}
        # The stream really broke, and the reflector came back either by resuming from its
        # resourceVersion or by relisting after 410 Gone (the new watch cache starts later).
        assert reflector.broken_streams + reflector.gone >= 1
        assert reflector.lists == 1 + reflector.gone

        # The restarted API server's watch cache starts at the current revision: a watch from
        # a resourceVersion before the last write gets 410 Gone, so clients must relist.
        w = watch.Watch()
        with pytest.raises(ApiException) as err:
            async with w:
                async for _ in w.stream(
                    core.list_namespaced_config_map,
                    namespace,
                    resource_version=old_rv,
                    timeout_seconds=5,
                ):
                    pass
        assert err.value.status == 410
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
