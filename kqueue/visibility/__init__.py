"""Visibility: what waits in a queue, in the order the engine would admit it, and why.

One answer for every reader: the ``kubectl kqueue pending`` command (over an engine built from
the cluster's objects) and the ``visibility.kqueue.io`` API kqueue will serve (over the
controller's own engine) both call :mod:`kqueue.visibility.pending`. Pure: no I/O, like the
engine it reads.
"""
