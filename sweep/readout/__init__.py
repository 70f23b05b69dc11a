"""What the user reads: progress, the closing table, the verdict and its comparisons.

console         the console; progress per trial (i/N, ETA, live tok/s) and the closing trials table
ranking         what "fastest" and "best" mean for a study (a weighted study: its aggregate)
verdict         the lines under the table: best with its paired interval, wall time, drift
comparisons     without a baseline: each trial against search.reference and one-knob pairs
memory_lines    the memory line per trial and the KV-bound lines
banner          the banner's account of what a sweep measures, and what it measures again
commands        the commands it prints, spelled to run where the user is, secrets left out
"""
