"""`python -m sweep.services`: the shared services several workers need, and a cluster to run them.

__main__    `python -m sweep.services`
stores      PostgreSQL (the Optuna study) and an MLflow tracking server, on loopback or listening
auth        credentials for services that other nodes reach (--listen)
slurm       `python -m sweep.services slurm start|stop`: a single-node SLURM cluster in one folder
slurm_conf  what that cluster installs, reads from the machine and writes to its slurm.conf
"""
