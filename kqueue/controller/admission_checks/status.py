"""AdmissionChecks into the engine, and the Active condition of kqueue's own checks.

Every AdmissionCheck reaches the engine with why it is inactive (its ``Active`` condition: a
check nobody marked Active is inactive), which makes the ClusterQueues that use it inactive
(``AdmissionCheckNotFound``/``AdmissionCheckInactive``). kqueue writes ``Active`` only on the
checks of its built-in controllers: True when their parameters exist, False with the reason
otherwise. Checks of another controllerName are the external controller's to mark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kqueue.api.v1alpha1 import AdmissionCheck, ConditionStatus, set_condition
from kqueue.api.v1alpha1.admissioncheck import ACTIVE
from kqueue.controller.admission_checks.framework import CheckController
from kqueue.controller.clock import Now
from kqueue.controller.informer import Store
from kqueue.controller.kube import Kube
from kqueue.controller.resources import ADMISSION_CHECKS
from kqueue.controller.workqueue import Requeue
from kqueue.engine.engine import Engine
from kqueue.engine.from_api import (
    admission_check_delegates,
    admission_check_inactive,
    admission_check_provisions,
)

Obj = dict[str, object]


def feed(engine: Engine, checks: Store[AdmissionCheck]) -> None:
    """Every AdmissionCheck of the store into ``engine`` (a rebuilt engine)."""
    for ac in checks.objects():
        engine.upsert_admission_check(
            ac.name, admission_check_inactive(ac), provisions=admission_check_provisions(ac),
            delegates=admission_check_delegates(ac),
        )


class CheckStatus:
    """Writes the Active condition of built-in checks (key: the AdmissionCheck's name)."""

    def __init__(
        self,
        *,
        checks: Store[AdmissionCheck],
        controllers: Mapping[str, CheckController],
        kube: Kube,
        now: Now,
        on_written: Callable[[], None] = lambda: None,
    ) -> None:
        self._checks = checks
        self._controllers = controllers
        self._kube = kube
        self._now = now
        self._on_written = on_written

    def wanted(self, ac: AdmissionCheck) -> tuple[ConditionStatus, str, str] | None:
        """(status, reason, message) of the Active condition kqueue sets; None: not ours."""
        ctrl = self._controllers.get(ac.spec.controller_name)
        if ctrl is None:
            return None
        inactive = ctrl.inactive(ac)
        if inactive is None:
            return "True", "Active", "The admission check is active"
        return "False", inactive.reason, inactive.message

    async def __call__(self, name: str) -> Requeue | None:
        ac = self._checks.get(name)
        if ac is None:
            return None
        want = self.wanted(ac)
        if want is None:
            return None
        cond = ac.condition_active()
        if cond is not None and (cond.status, cond.reason, cond.message) == want:
            return None

        def change(obj: Obj) -> Obj | None:
            fresh = AdmissionCheck.model_validate(obj)
            set_condition(
                fresh.status.conditions, ACTIVE, want[0], want[1], want[2], self._now(),
                fresh.metadata.generation,
            )
            return fresh.to_dict()

        await self._kube.modify_status(ADMISSION_CHECKS, name, change)
        self._on_written()
        return None
