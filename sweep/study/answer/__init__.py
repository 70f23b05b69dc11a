"""What the study concludes, and how its close says it.

all_sweeps      the study's results across every sweep and worker; the starts n_trials counts
levels          the recommendation per level: what to deploy at each concurrency
equal_caps      the baseline's max_running_requests against the trials' (equal caps)
no_speculation  the baseline a deployment runs at each level, which the answer compares with
recommendation  the study's one answer (Deploy line, summary, parent run, report, reproduce)
unresolved      when that answer is unresolved, and what a round of more runs relaunches
pooling         a relaunch's or a screen's runs pooled into its configuration's record
settled         whether the best trails the baseline beyond its interval: speculation off
parent_run      what the parent run carries besides the summary: table, importances, figures
signals         a Ctrl-C held back for the few lines where the close decides what it records
summary         the close: table and verdict, summary-<time>.json, the parent run
"""
