"""What a trial leaves behind, as the sweep, MLflow and analysis all read it.

results    the typed records (TrialResult, RunSummary, ...) of trial folders and MLflow
layout     ResultsLayout: the one description of the results folder
labels     short configuration labels ("steps=3 topk=1 ...", "3/1/4")
stats      mean and 95% interval over runs, the paired speedup interval, consistency
precision  the digits each metric is worth where a person reads it (MLflow, the report)
"""
