"""`python -m sweep.reproduce`: re-measure a study's answer and export its launch.

__main__     `python -m sweep.reproduce`
remeasure    which trial is the answer, re-measured with fresh runs
deploy_form  the command a user deploys: SGLang's, even from a simulated trial; what to warn
export       a measured configuration as a launch script and a service unit
"""
