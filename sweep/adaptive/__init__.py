"""`python -m sweep.adaptive`: SGLang's adaptive speculative decoding against the best static one.

__main__      `python -m sweep.adaptive`
cli           the command: its arguments, then the file, each launch, the table, the MLflow run
config_file   a study's per-level measurements -> an --speculative-adaptive-config file, written
sglang_check  SGLang's environment (.venv-compat) and its own loader's reading of a config file
head_to_head  the head-to-head per level (best static / SGLang's default adaptive / the file)
tracking      the head-to-head as an MLflow run under the sweep's parent run
"""
