"""kqueue.controller: Kubernetes I/O (informers, reconcilers, integrations, webhooks, metrics)."""
