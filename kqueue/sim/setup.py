"""The engine configuration the simulator uses by default: the preemptor the controller uses."""

from __future__ import annotations

from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.preemption.seam import Preemptor


def default_preemptor() -> Preemptor:
    """Kueue's classical preemption, as the controller configures it."""
    return ClassicalPreemptor()
