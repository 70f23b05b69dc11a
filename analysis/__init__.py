"""Trial folders (or their MLflow copy) -> pandas -> figures and a report. Reads the folders
through `harness.record.results` and MLflow only in `analysis.mlflow_load`; never launches a
server."""
