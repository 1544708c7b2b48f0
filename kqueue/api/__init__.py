"""kqueue.api: pydantic models of the kqueue.io/v1alpha1 API, validation, defaulting, Kueue import.

No I/O happens in this layer: it turns dicts into validated models and back.
"""
