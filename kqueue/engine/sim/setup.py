"""The engine configuration the simulator uses by default: the preemptor the controller uses."""

from __future__ import annotations

from ..preemption import Preemptor
from ..preemptor import ClassicalPreemptor


def default_preemptor() -> Preemptor:
    """Kueue's classical preemption, as the controller configures it."""
    return ClassicalPreemptor()
