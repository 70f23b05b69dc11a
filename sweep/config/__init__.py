"""The composed Hydra config: its schema, and the one place it becomes the harness's specs.

schema         the dataclasses the YAML groups extend (a typo fails at composition)
override_keys  command-line keys the schema lacks (+key too), refused with the nearest names
specs          DictConfig -> frozen specs (engine, server, benchmark, trial), validated once
fraction       the --mem-fraction-static a launch runs at when its config leaves it unset
workload       the workload and the sampling the measured requests carry, as the config chooses
drafter_check  the drafter gate as the config sets it: its verdict cache, check_drafter
setup_key      what a measurement depends on besides the searched values, readable and hashed
study_name     the study a command line lands in: named from its setup; the knobs it holds
"""
