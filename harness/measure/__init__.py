"""Measuring a ready server: warm-up, flush, runs per concurrency level, and what they mean.

bench         the benchmark's steps: warm-up, then per scheduled run flush + measure
schedule      the run scheduler: repeats, replaced incomplete runs, adaptive runs, early stop
watchdog      the server watch beside every step: a server that dies ends the step at once
flush         the flush before a run: SGLang's wait-for-idle `?timeout=`, refusals retried
sender        a phase's requests sent (a wave, or steady state) and kept: records, timelines
prompt_plan   which prompts each run sends: warm-up apart, runs disjoint, run r paired across trials
sampling      temperature/top_p/top_k from a checkpoint's generation_config.json
client        one streaming request (chat or /generate) -> RequestRecord + token timeline
http_stream   the lean HTTP/1.1 reader for streamed responses
client_cpu    the client's own CPU per measured run; the client_bound rule
steady        steady state at C > 1: C requests in flight, the window they are measured in, the cut
rounds        multi-round users: a slot holds a conversation that grows round by round
timeline      a request's stream chunks: arrival times and cumulative tokens, the simulator's stamps
clock         wall-clock durations as server-clock durations: a simulator's stamps, client gaps
sim_timing    a simulator's lag behind its clock, run by run, and the host's load beside it
acceptance    a run window's accept length, from the best source the server offers
step_acceptance  P(>=k) per level from the stream's verify steps: merged chunks, the ends
prometheus    SGLang's /metrics text read into {name: value}, summed over labels
metrics       runs from request timelines: windows, rates, percentiles; the trial's over its runs
memory_probe  a run window's memory from SGLang's lines and /metrics: usage, queue, cache hits
memory        the trial's memory: the KV and host pools, per-level means, the KV-bound verdict
lossless      greedy outputs compared token for token with the baseline's
surface_check  what the harness reads from a server (fields, metrics, log lines), checked at ready
"""
