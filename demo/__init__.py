"""`make demo`: the whole toolkit end to end on the real stack (see run.py)."""
