"""A stand-in for `sglang.launch_server` that runs on a CPU.

It accepts SGLang's command line, serves SGLang's HTTP surface, prints SGLang's log lines and
derives speed, accept length and OOM from `perf_model`. It is a test bed and a dry-run engine:
everything it produces is simulated, and it says so in `/server_info` (`simulator`).
"""
