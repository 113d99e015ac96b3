"""`python -m bench`'s commands, one module each (run, report, tune, sweep, sweep_report, publish): each owns its
arguments and what it does; `command.py` is the wrapper that runs any of them and turns the errors a person can fix
into one sentence and an exit code."""
