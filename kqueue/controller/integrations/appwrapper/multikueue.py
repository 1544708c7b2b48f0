"""The AppWrapper's MultiKueue adapter (Kueue's appwrapper_multikueue_adapter.go): the whole
spec without ``spec.managedBy`` (any value is allowed, so kqueue's), the status copied back."""

from __future__ import annotations

from typing import Final

from kqueue.api.integrations.appwrapper import API_VERSION
from kqueue.controller.admission_checks.multikueue.adapters import CopyAdapter
from kqueue.controller.integrations.appwrapper.generic import APPWRAPPERS

ADAPTER: Final = CopyAdapter(
    API_VERSION, "AppWrapper", APPWRAPPERS, "workload.codeflare.dev/appwrapper-controller"
)
