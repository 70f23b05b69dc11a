"""What a sweep keeps: MLflow runs and the provenance of every measurement.

runs        MLflow at the edge: one parent run per sweep, one child run per trial
provenance  what was measured and on what: provenance.json and its MLflow tags
view        the study's view in MLflow's UI: its runs flat, best first, numbers as columns
pooled      a trial's MLflow run and tracking.json brought up to its pooled record (resolve)
where       where a sweep's results are kept, and the commands that open them
identity    a study is one setup: the setup and baseline it recorded, another setup refused
sqlite_wal  a local sqlite store in write-ahead-log mode: one sync per commit
"""
