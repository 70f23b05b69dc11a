"""`python -m sweep.reproduce`: re-measure a study's answer and export its launch.

__main__     `python -m sweep.reproduce`
remeasure    the command: the answer re-measured with fresh runs, and its exports written
options      its command line, and the same command with an option changed, as printed
choose       which run is the answer: the study's, the best at a level, or the one asked for
load         the load the answer was chosen for, and the commands that check another
measured     what the trial's server ran with (attention backend, caps, engine), as pins
deploy_form  the command a user deploys: SGLang's, even from a simulated trial; what to warn
export       a measured configuration as a launch script, a service unit and deployment.json
"""
