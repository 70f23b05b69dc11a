"""The speculative-decoding model of a study: what it has measured, predicting what it has not.

observations  what one measured trial tells the model (accept length, P(>=k), speed and requests
              per level, the CUDA-graph sizes it captured, the KV pool it reported)
admission     the requests the KV pool admits per level, from the pools the launches reported
acceptance    tokens per verify step: per-depth P(>=k) for chains, a sibling factor for trees
tree_selection  what a tree adds to its chain under SGLang's per-round selection of its nodes
cost          seconds per verify iteration, linear in the launch's features at the CUDA-graph
              batch its steps replayed (a staircase in the requests), per level
predict       the objective of every unmeasured configuration, with an interval
knowledge     what the study knows at a proposal: candidates, the best value, screened runs
screening     what one screened run would tell, and where a screen tells most about the best
sampler       search.sampler=model: opening, expected improvement per GPU-hour, screening
stopping      the answer settled: nothing left reaches the baseline, or beats the best
transfer      earlier studies with the same drafter and setup, in the fit (labelled)
watch         the model beside each measurement on the console; the stopping line
"""
