"""The composed Hydra config: its schema, and the one place it becomes the harness's specs.

schema  the dataclasses the YAML groups extend (a typo fails at composition)
specs   DictConfig -> frozen specs, validated once; the drafter gate; setup_key
"""
