"""`python -m sweep.services`: the shared services several workers need.

__main__  `python -m sweep.services`
stores    PostgreSQL (the Optuna study) and an MLflow tracking server, on loopback or listening
auth      credentials for services that other nodes reach (--listen)
"""
