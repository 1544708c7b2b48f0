""""Did you mean ...?": the closest known name to one that does not exist.

One helper for every place a person typed a name kqueue does not know: ``kqueue explain`` (a
workload or queue), ``kqueue simulate`` (a Job's LocalQueue), and the controller's admission
warnings. A typo such as ``user-qeue`` then comes back with ``did you mean "user-queue"?``
instead of a bare "not found".

Closeness is :func:`difflib.get_close_matches` (Ratcliff/Obershelp similarity); a candidate
below ``cutoff`` is no suggestion at all, since a wrong guess misleads more than none.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Final

DEFAULT_CUTOFF: Final = 0.6


def closest(name: str, candidates: Iterable[str], *, cutoff: float = DEFAULT_CUTOFF) -> str | None:
    """The candidate most similar to ``name``, or None when none is similar enough.

    ``name`` itself among the candidates is not a suggestion (it exists: nothing to correct).
    Ties go to the candidate that sorts first, so the answer does not depend on the order the
    candidates come in (an informer's store, a manifest).
    """
    pool = sorted({c for c in candidates if c and c != name})
    if not name or not pool:
        return None
    # get_close_matches keeps the best first and, among equals, the earlier one: sorted input
    # makes the tie-break alphabetical.
    matches = difflib.get_close_matches(name, pool, n=len(pool), cutoff=cutoff)
    if not matches:
        return None
    best = max(difflib.SequenceMatcher(None, name, m).ratio() for m in matches)
    return min(m for m in matches if difflib.SequenceMatcher(None, name, m).ratio() == best)


def did_you_mean(name: str, candidates: Iterable[str], *, cutoff: float = DEFAULT_CUTOFF) -> str:
    """``'did you mean "user-queue"?'``, or ``""`` when there is nothing close to suggest.

    Meant to end a message: ``"; ".join(filter(None, [f"LocalQueue {name} not found", hint]))``.
    """
    best = closest(name, candidates, cutoff=cutoff)
    return f'did you mean "{best}"?' if best is not None else ""


__all__ = ["DEFAULT_CUTOFF", "closest", "did_you_mean"]
