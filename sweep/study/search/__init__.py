"""What a study tries.

space   the search space from conf/search/, with SGLang's draft-token rules
priors  the configurations measured before the sampler proposes anything
memory  the memory knobs chosen from what they can change (a sampler around the study's)
"""
