"""The sweep: Hydra composes, Optuna searches, MLflow keeps; the only package that touches them.

Entry point: `python sweep.py -m` (or `specsweep sweep`).

sweeper    the Hydra sweeper: plan (validate, compose, preflight) -> the study loop
study      the study loop, one concern per module
launch     where and how a trial runs: its job, GPUs and port, workers
config     the config schema and the one DictConfig -> specs conversion
tracking   what is kept: MLflow runs, provenance
readout    what the user reads: progress, the trials table, the verdict
paths      the checkout's root, conf/ and the compat stubs
preflight  `python -m sweep.preflight`: what would sink a sweep, at second 0
reproduce  `python -m sweep.reproduce`: re-measure the answer, export its launch
adaptive   `python -m sweep.adaptive`: adaptive speculation head to head
compat     `python -m sweep.compat`: SGLang's own parser and bench_serving
services   `python -m sweep.services`: PostgreSQL, MLflow (and SLURM) for workers
sync       `python -m sweep.sync`: upload what MLflow lacks
"""
