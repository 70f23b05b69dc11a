"""Tracked results -> pandas -> figures and a report. Reads MLflow and `harness.results` only;
never launches a server."""
