"""`python -m sweep.compat`: does SGLang's own code accept what specsweep launches and reads?

__main__       `python -m sweep.compat`
parser_check   every shipped launch through SGLang's own parser (and the simulator's)
bench_serving  with --bench, SGLang's own bench_serving against the simulator
"""
