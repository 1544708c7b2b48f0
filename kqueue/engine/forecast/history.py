"""Run times of finished workloads, per LocalQueue and pod-set shape, decayed with age.

A finished workload's run time (admitted to finished, in whole seconds) is a sample of its
LocalQueue. A later workload's run time is estimated by the weighted p50 and p90 of its queue's
samples, each sample weighing ``2 ** -(age / half_life)``: recent runs count more, so a queue
whose jobs changed is followed within a few half-lives. Samples of the same pod-set shape
(names, counts and per-pod requests) are used when there are at least ``min_shape_samples`` of
them; otherwise all samples of the LocalQueue; with none, no estimate.

Seconds are integers (a quantile is one of the samples, never an interpolation).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from kqueue.engine.types import LocalQueueKey, Workload

DEFAULT_HALF_LIFE: Final = timedelta(days=1)
DEFAULT_KEEP: Final = 256
DEFAULT_MIN_SHAPE_SAMPLES: Final = 3

Shape = Hashable


def shape_of(wl: Workload) -> Shape:
    """The pod-set shape: what makes two workloads of a queue "the same kind of job"."""
    return tuple(
        (str(ps.name), ps.count, tuple(sorted((str(r), q) for r, q in ps.requests.items())))
        for ps in wl.pod_sets
    )


@dataclass(frozen=True, slots=True)
class Sample:
    seconds: int
    finished: datetime
    shape: Shape


@dataclass(frozen=True, slots=True)
class RunTime:
    """A LocalQueue's estimate of one workload's run time."""

    p50: int
    p90: int
    # How many samples it came from, and whether they were of the workload's own shape.
    samples: int
    per_shape: bool


def weighted_quantile(samples: Iterable[tuple[int, float]], q: float) -> int:
    """The smallest value whose cumulative weight reaches ``q`` of the total (values and
    weights as pairs; at least one pair)."""
    ordered = sorted(samples)
    total = sum(w for _, w in ordered)
    seen = 0.0
    for value, weight in ordered:
        seen += weight
        if seen >= q * total:
            return value
    return ordered[-1][0]


class RunTimeHistory:
    """The most recent ``keep`` run times of each LocalQueue."""

    def __init__(
        self,
        *,
        half_life: timedelta = DEFAULT_HALF_LIFE,
        keep: int = DEFAULT_KEEP,
        min_shape_samples: int = DEFAULT_MIN_SHAPE_SAMPLES,
    ) -> None:
        if half_life <= timedelta(0):
            raise ValueError(f"half_life must be positive, got {half_life}")
        if keep < 1 or min_shape_samples < 1:
            raise ValueError(
                f"keep and min_shape_samples must be >= 1, got {keep} and {min_shape_samples}"
            )
        self.half_life = half_life
        self.keep = keep
        self.min_shape_samples = min_shape_samples
        self._samples: dict[LocalQueueKey, deque[Sample]] = {}
        # Finished workloads already counted (a relist shows them again).
        self._seen: dict[str, None] = {}

    def record(
        self, lq: LocalQueueKey, wl: Workload, admitted: datetime, finished: datetime,
        *, uid: str | None = None,
    ) -> bool:
        """A workload of ``lq`` ran from ``admitted`` to ``finished``; False when ``uid`` was
        recorded already or the times are reversed."""
        ident = uid or f"{wl.key}@{admitted.isoformat()}"
        if ident in self._seen or finished < admitted:
            return False
        self._seen[ident] = None
        if len(self._seen) > 16 * self.keep:
            # Forget the oldest identities: only relists of recent finishes can repeat.
            for old in list(self._seen)[: len(self._seen) // 2]:
                del self._seen[old]
        seconds = int((finished - admitted).total_seconds())
        q = self._samples.setdefault(lq, deque(maxlen=self.keep))
        q.append(Sample(seconds, finished, shape_of(wl)))
        return True

    def knows(self, uid: str) -> bool:
        """Whether the run of ``uid`` is recorded already (a relist shows it again)."""
        return uid in self._seen

    def copy(self) -> RunTimeHistory:
        """A copy to read on another thread while this one keeps recording."""
        out = RunTimeHistory(
            half_life=self.half_life, keep=self.keep, min_shape_samples=self.min_shape_samples
        )
        out._samples = {lq: deque(q, maxlen=self.keep) for lq, q in self._samples.items()}
        return out

    def samples(self, lq: LocalQueueKey) -> int:
        return len(self._samples.get(lq, ()))

    def estimate(self, lq: LocalQueueKey, wl: Workload, now: datetime) -> RunTime | None:
        """``wl``'s run time from its queue's history as of ``now``; None without history."""
        all_samples = self._samples.get(lq)
        if not all_samples:
            return None
        shape = shape_of(wl)
        same = [s for s in all_samples if s.shape == shape]
        per_shape = len(same) >= self.min_shape_samples
        chosen = same if per_shape else list(all_samples)
        half = self.half_life.total_seconds()
        weighted = [
            (s.seconds, 2.0 ** -(max((now - s.finished).total_seconds(), 0.0) / half))
            for s in chosen
        ]
        return RunTime(
            p50=weighted_quantile(weighted, 0.5),
            p90=weighted_quantile(weighted, 0.9),
            samples=len(chosen),
            per_shape=per_shape,
        )
