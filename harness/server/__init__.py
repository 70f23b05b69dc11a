"""The server process and what it is launched with: SGLang's argv, its flags, its life and death.

command          specs -> ServerCommand: argv, env, base URL, request headers, secrets (pure)
flags            which flag surface an installed SGLang speaks; flags refused before a launch
adaptive_config  an --speculative-adaptive-config file, read and checked before a launch
process          the server as a context manager: own process group, redacted log, readiness
procs            pids, process groups, ports: liveness, signals, waits, leftovers
gpu              NVML inventory and holders; GPU memory released before the next launch
logs             SGLang's log lines and failure classification
startup          start-up phases from the output (split on \\r and \\n), the server's durations
redact           secrets out of everything recorded: argv, env, logs, URLs
"""
