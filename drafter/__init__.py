"""EAGLE-3 drafter checkpoints: inspect without loading weights, validate against the target,
measure the footprint, and (with torch) run one CPU forward pass.

Imports nothing of the project, so `python -m drafter check` works anywhere.

__main__    `python -m drafter check`
checkpoint  a checkpoint's headers and config, read without loading weights
checks      the checks against the target model; the footprint
deep        the CPU forward pass (torch)
"""
