"""The simulator: manifests (or a generated shape) played through the Engine in simulated time.

An application of the engine, one layer above it (pyproject.toml's import contracts): it reads
manifests through the API's loader and drives ``kqueue.engine.Engine`` as the controller does.
Pure logic all the same: no I/O, no real clock. ``scenario`` reads loaded objects, ``driver``
runs the Engine over simulated time, ``report`` builds the contract's JSON and Kueue's
performance figures, ``generate`` builds Kueue's scheduler performance shapes, ``explain``
replays one workload's story.
"""
