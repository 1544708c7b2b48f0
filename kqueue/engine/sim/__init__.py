"""The simulator: manifests (or a generated shape) played through the Engine in simulated time.

Pure logic, like the rest of the engine: no I/O, no real clock. ``scenario`` reads loaded objects,
``driver`` runs the Engine over simulated time, ``report`` builds the contract's JSON and Kueue's
performance figures, ``generate`` builds Kueue's scheduler performance shapes.
"""
