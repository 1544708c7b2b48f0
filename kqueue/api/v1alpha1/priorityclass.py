"""WorkloadPriorityClass: a named priority for workloads, independent of pod priority."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from kqueue.api.v1alpha1.base import Int32
from kqueue.api.v1alpha1.meta import KObject


class WorkloadPriorityClass(KObject):
    """A named priority for queueing and preemption, chosen with the kqueue.io/priority-class
    (or kqueue.io/preemption-priority-class) label. Cluster-scoped."""

    KIND: ClassVar[str] = "WorkloadPriorityClass"
    PLURAL: ClassVar[str] = "workloadpriorityclasses"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("wpc",)

    kind: Literal["WorkloadPriorityClass"] = Field(
        default="WorkloadPriorityClass", description="Kind of this object: WorkloadPriorityClass."
    )
    value: Int32 = Field(
        description="The priority workloads of this class get; higher is more important. "
        "Changing it does not change workloads already created."
    )
    description: str | None = Field(
        default=None,
        max_length=2048,
        description="When this class should be used (at most 2048 characters).",
    )
