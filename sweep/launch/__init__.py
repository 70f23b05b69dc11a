"""Where and how a trial runs: its job, its GPUs and port, the workers that hold them.

app          the Hydra task: one job = one trial (or the baseline); `python sweep.py` = one trial
single       that one trial: a folder per call, its study's baseline for the same setup
snapshot     the study's frozen copy of conf/: every trial of every sweep composes from it
jobs         the one job path: compose a job's config, run it in its folder, its trial.log
parse_check  every launch parsed by the parser that will run it, before any does
memory_default  what a launch without --mem-fraction-static gets from SGLang, told first
slots        GPU slots: GPUs + port per trial, node-local locks, leftover servers
workers      worker.count: Hydra's launcher places whole workers (SLURM: one per node)
slurm_jobs   the SLURM launcher's jobs: states from squeue without accounting, the time-limit signal
"""
