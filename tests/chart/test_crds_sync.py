"""The chart ships the CRDs generated into api/, byte for byte."""

from __future__ import annotations

from tests.chart.conftest import CHART, ROOT

FIX = "run `make chart-crds` (hack/sync-chart-crds.sh) after `make crds`"


def test_chart_crds_are_the_generated_ones() -> None:
    generated = {p.name: p.read_bytes() for p in sorted((ROOT / "api").glob("*.yaml"))}
    shipped = {p.name: p.read_bytes() for p in sorted((CHART / "crds").glob("*.yaml"))}
    assert generated, "api/ holds no CRDs; run `make crds`"
    missing = sorted(set(generated) - set(shipped))
    extra = sorted(set(shipped) - set(generated))
    stale = sorted(n for n in set(generated) & set(shipped) if generated[n] != shipped[n])
    assert not (missing or extra or stale), (
        f"charts/kqueue/crds differs from api/: missing {missing}, extra {extra}, "
        f"out of date {stale}; {FIX}"
    )
