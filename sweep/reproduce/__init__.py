"""`python -m sweep.reproduce`: re-measure a study's answer and export its launch.

remeasure  which trial is the answer, re-measured with fresh runs
export     a measured configuration as a launch script and a service unit
"""
