

# -- invariants ----------------------------------------------------------------------------------

_LABEL_KEYS = st.sampled_from(
    [QUEUE, PRIORITY, c.PREEMPTION_PRIORITY_CLASS_LABEL, c.PREEMPTIBILITY_LABEL, "team", "app"]
)
_VALUES = st.sampled_from(["a", "b", "preemptible"])


@given(
    st.dictionaries(_LABEL_KEYS, _VALUES),
    st.dictionaries(_LABEL_KEYS, _VALUES),
)
async def test_deployment_defaulting_propagates_exactly_and_is_idempotent(
    labels: dict[str, str], template_labels: dict[str, str]
) -> None:
    from kqueue.api.integrations.deployment import PROPAGATED_LABELS

    dep = _dep(labels=labels, template_labels=template_labels)
    verdict = await deployment_webhook.mutate(_request(dep))
    if QUEUE not in labels:
        assert verdict.patched is None
        return
    out = verdict.patched if verdict.patched is not None else dep
    got = out["spec"]["template"]["metadata"]["labels"]
    for key in PROPAGATED_LABELS:
        assert got.get(key) == labels.get(key)
    for key, value in template_labels.items():
        if key not in PROPAGATED_LABELS:
            assert got[key] == value
    again = await deployment_webhook.mutate(_request(out, out))
    assert again.patched is None


@given(st.integers(min_value=0, max_value=50), st.booleans())
async def test_statefulset_defaulting_is_idempotent(replicas: int, labelled: bool) -> None:
    sts = _sts(labels={QUEUE: "q"} if labelled else {}, replicas=replicas)
    first = await sts_webhook.mutate(_request(sts))
    out = first.patched if first.patched is not None else sts
    assert (first.patched is not None) == labelled
    assert (await sts_webhook.mutate(_request(out, out))).patched is None
    assert out["spec"]["replicas"] == replicas
