"""The study loop of `python sweep.py -m`, one concern per module.

plan         SweepPlan: the typed settings the sweeper settled before anything started
space        the search space from conf/search/, with SGLang's draft-token rules
memory       the memory knobs chosen from what they can change (a sampler around the study's)
capacity     whether the KV pool the servers report binds at the objective's highest level
feasibility  where mem_fraction_static runs out, learned from the study's trials
priors       the configurations measured before the sampler proposes anything
model        search.sampler=model: the speculative model, its proposals and stopping rule
candidates   a trial as SGLang will run it; the rule that predicts an OOM
objective    what the study optimises and the values a result gives it
budget       what the study has spent in GPU-hours, and when a budget is used up
crashes      a failure's signature; the same crash twice is not launched again
driver       verdicts (duplicate, predicted OOM, known crash), the prune bound, telling Optuna
storage      Optuna storage, heartbeats, stale trials (the only user of Optuna's private API)
claims       who evaluates what right now, across workers
opening      opening MLflow, the study and the claims, refusing with a reason
session      what the steps of one sweep share
baseline     measured once per study, reused, re-checked for drift
caps         the baseline's max_running_requests against the trials' (equal caps)
trials       ask -> verdict -> launch -> tell, serially or in GPU slots
records      results the study writes itself for trials it does not launch
history      the study's results across every sweep and worker; the starts n_trials counts
levels       the recommendation per level: what to deploy at each concurrency
deployed     the baseline a deployment runs at each level, which the study's answer compares with
deploy       the study's one answer (Deploy line, summary, parent run, report, reproduce)
resolve      when that answer is unresolved, and what a round of more runs relaunches
pooling      a relaunch's runs pooled into its configuration's record (result.json)
resolve_phase  the rounds of more runs on the contenders, until resolved or the budget ends
artifacts    what the parent run carries besides the summary: table, importances, figures
summary      the close: table and verdict, summary-<time>.json, the parent run
signals      a Ctrl-C held back for the few lines where the close decides what it records
run          StudyRun: the sweep from opening to summary
"""
