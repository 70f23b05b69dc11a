"""`python -m sweep.sync`: upload the trial folders MLflow lacks.

__main__  `python -m sweep.sync`
upload    the folders, their runs and artifacts, into the tracking store
"""
