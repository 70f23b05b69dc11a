"""The simulator's performance model: what a step costs and how many tokens it accepts.

perf_model     step times, acceptance and memory of the simulated server
memory_plan    the GPU memory a launch plans: its KV pool, its CUDA graphs, its start-up failure
profiles       the constants the model is built from, each with its source
shapes         optional acceptance and cost shapes (off by default) for the search family
draft_tree     each request's draft tree per round, selected from the draft's scores as SGLang does
drift          the simulated machine's slowly wandering speed
adaptive       SGLang's adaptive speculative decoding, as the simulator serves it
adaptive_args  the adaptive flags at start-up, as SGLang resolves them
"""
