"""EAGLE-3 drafter checkpoints: inspect without loading weights, validate against the target,
measure the footprint, and (with torch) run one CPU forward pass.

Imports nothing of the project, so `python -m drafter check` works anywhere.
"""
