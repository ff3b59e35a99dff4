"""Hyper-parameter sweeps on Optuna (``python sweep.py``): each trial is ``train.py`` in a fresh process.

- ``spec.py`` reads and checks a sweep file (``config/sweeps/*.yaml``) against the config schema;
- ``study.py`` runs the trials (ask, launch ``train.py --set ...``, tell) and recovers a killed sweep;
- ``report.py`` is the callback inside each trial that reports evaluations to the study (pruning);
- ``results.py`` prints the table and writes the best trial (as a whole experiment) and the history plot.

Optuna is the optional extra ``[sweep]``; nothing here imports it before a sweep starts.
"""
