"""Optuna study, search space, the Hydra sweeper, trial orchestration, baseline and MLflow.

The only package that touches Hydra, Optuna or MLflow. Entry point: `python sweep.py -m`.
"""
