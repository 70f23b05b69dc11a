"""`python -m sweep.adaptive`: SGLang's adaptive speculative decoding against the best static one.

__main__      `python -m sweep.adaptive`
head_to_head  the head-to-head per level (best static / SGLang's default adaptive / the file)
config_file   a study's per-level measurements -> an --speculative-adaptive-config file
"""
