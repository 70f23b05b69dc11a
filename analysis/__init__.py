"""Trial folders (or their MLflow copy) -> pandas -> figures and a report.

Reads the folders through `harness.record` and MLflow only in `mlflow_load`; never launches a
server.

load         the study's frame, from the folders (default) or MLflow
folders      trial folders -> rows, through harness.record
mlflow_load  MLflow runs -> rows (the only module here that imports MLflow)
frame        the frame both loaders build
objective    what the figures rank and label by: the study's recorded objective
plots        the figures
capacity     the two capacity figures
levels       speedup against concurrency, the per-level table, parameter importances
report       `python -m analysis.report`: the figures and an HTML index
requests     `python -m analysis.requests`: every request as one table, per-prompt comparison
notebooks    the same for any study, as notebooks
"""
