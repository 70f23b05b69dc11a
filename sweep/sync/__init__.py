"""`python -m sweep.sync`: upload the trial folders MLflow lacks.

upload  the folders, their runs and artifacts, into the tracking store
"""
