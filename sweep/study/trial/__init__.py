"""What a trial is and what becomes of it.

objective    what the study optimises and the values a trial's result gives it
candidates   a trial as SGLang will run it; the rule that predicts an OOM
feasibility  where mem_fraction_static runs out, learned from the study's trials
capacity     whether the KV pool the servers report binds at the objective's highest level
screened     a one-run screening launch; the fraction its full launch runs at
crashes      a failure's signature; the same crash twice is not launched again
unlaunched   results the study writes itself for trials it does not launch
"""
