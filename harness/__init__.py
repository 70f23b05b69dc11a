"""Launch SGLang (or its simulator), benchmark it, and describe the result.

No Hydra, Optuna or MLflow in here: the harness takes frozen specs and returns typed records.
"""
