"""Trial folders (or their MLflow copy) -> pandas -> figures and a report.

Reads the folders through `harness.record` and MLflow only in `mlflow_load`; never launches a
server.

load         the study's frame, from the folders (default) or MLflow
folders      trial folders -> rows, through harness.record
mlflow_load  MLflow runs -> rows (the only module here that imports MLflow)
frame        the frame both loaders build
objective    what the figures rank and label by: the study's recorded objective
figures      every figure the report draws, in order, and the line for one left out
absent       why a figure has nothing to show, computed from the frame
notes        the notes drawn on figures, each computed from the data it describes
plots        the figures of speed, parameters, memory, concurrency and history
acceptance   the acceptance figures: by output position and P(>=k) by draft depth
capacity     the two capacity figures
levels       speedup against concurrency; the sweep's per-level rows and answer, read
tables       the report's tables in words, with a line for each column left out
words        the report's words for outcomes, warnings and column names
report       `python -m analysis.report`: the figures and an HTML index
requests     `python -m analysis.requests`: every request as one table, per-prompt comparison
notebooks    the same for any study, as notebooks
"""
