"""One sweep from opening its stores to its close.

plan            SweepPlan: the typed settings the sweeper settled before anything started
opening         opening MLflow, the Optuna study and the claims, refusing with a reason
optuna_storage  Optuna storage, heartbeats, stale trials (the only user of Optuna's private API)
claims          who evaluates what right now, across workers
session         what the steps of one sweep share
baseline        the no-speculation baseline: measured once per study, reused, re-checked for drift
decisions       per trial: duplicate, predicted OOM or known crash; the prune bound; telling Optuna
budget          what the study has spent in GPU-hours, and when a budget is used up
trial_count     the server starts search.n_trials leaves this sweep, as the banner says them
trials          ask -> decide -> launch -> tell, serially or in GPU slots
work            the sweeper's own work per trial, by phase (wall and CPU seconds)
screens         a screened configuration launched in full: after its screen's runs, pooled
resolve_rounds  more runs on the contenders while the answer is unresolved
run             StudyRun: the sweep from opening to summary
"""
