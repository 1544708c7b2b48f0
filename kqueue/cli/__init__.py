"""kqueue.cli: the `kqueue` command."""
