"""The interface of an admission-check controller (docs/admission-checks.md).

A check controller owns the AdmissionChecks whose ``spec.controllerName`` is its name. kqueue
runs its built-in ones (``kqueue.io/provisioning-request``, ``kqueue.io/multikueue``); checks of any
other controller name belong to an external controller, which sets the check's ``Active``
condition and writes the workloads' check states itself. kqueue's part for every check,
whoever owns it, is in :mod:`.workload_checks`: the states listed on quota reservation,
Admitted once all are Ready, eviction on Retry, deactivation on Rejected, reset on eviction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from kqueue.api.v1alpha1 import AdmissionCheck, AdmissionCheckState, Workload


@dataclass(frozen=True)
class Inactive:
    """Why a check cannot be used now: the reason and message of its ``Active=False``."""

    reason: str
    message: str


@dataclass(frozen=True)
class Synced:
    """What a controller made of one check of one workload: its new state, and when to look
    again (seconds; None: on the next event)."""

    state: AdmissionCheckState
    again_after: float | None = None


class CheckController(Protocol):
    """A built-in admission-check controller."""

    @property
    def controller_name(self) -> str: ...

    def inactive(self, check: AdmissionCheck) -> Inactive | None:
        """Why ``check`` cannot be used (missing or wrong parameters); None when it can."""
        ...

    async def sync(
        self, wl: Workload, check: AdmissionCheck, state: AdmissionCheckState, now: datetime
    ) -> Synced:
        """Drive ``check`` for ``wl``, which holds quota and is not being evicted."""
        ...

    async def cleanup(self, wl: Workload) -> None:
        """``wl`` finished or is being evicted: delete what was created for it."""
        ...


def with_state(
    state: AdmissionCheckState, value: str, message: str, now: datetime
) -> AdmissionCheckState:
    """``state`` with a new value and message; its transition time moves only when the value
    changes."""
    update: dict[str, object] = {"state": value, "message": message}
    if value != state.state:
        update["last_transition_time"] = now
    return state.model_copy(update=update)
