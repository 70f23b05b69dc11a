"""The study behind `specsweep sweep` (`python sweep.py -m`), in four rooms and the model.

loop     one sweep from opening its stores to its close: baseline, trials, resolve rounds
search   what to try: the declared space, the first configurations, the memory knobs
trial    what a trial is and what becomes of it: its candidate and OOM rule, the values its
         result gives, where memory runs out, crashes, results written for trials not launched
answer   what the study concludes: per level, against the no-speculation baseline, the one
         recommendation, the table and summary the close writes
model    search.sampler=model: the speculative model, its proposals and stopping rule

The rooms import downwards only: loop over answer and model, model over search over trial
(answer reads trial's objective and records); .importlinter holds it.
"""
