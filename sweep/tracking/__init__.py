"""What a sweep keeps: MLflow runs and the provenance of every measurement.

runs        MLflow at the edge: one parent run per sweep, one child run per trial
provenance  what was measured and on what: provenance.json and its MLflow tags
pooled      a trial's MLflow run and tracking.json brought up to its pooled record (resolve)
"""
