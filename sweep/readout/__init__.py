"""What the user reads: progress, the closing table, the verdict and its comparisons.

console         the console, and how an outcome, a speed and a distorted SIMULATED timing read
trial_lines     progress per trial (redrawn in place, or verbose) and the line each trial ends with
trials_table    the closing trials table, fastest by the study's objective first
ranking         what "fastest" and "best" mean for a study (a weighted study: its aggregate)
verdict         the lines under the table: best with its paired interval, wall time, drift
comparisons     without a baseline: each trial against search.reference and one-knob pairs
memory_lines    the memory line per trial and the KV-bound lines
banner          the banner's account of what a sweep measures, and what it measures again
commands        the commands it prints, spelled to run where the user is, secrets left out
"""
