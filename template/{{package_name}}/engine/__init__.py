"""The core: what training is. ``loop.py`` (setup, then the loop), ``step.py`` (one jit step),
``optim.py``, ``data.py`` (batches), config and checkpoints. It imports nothing from the layers
around it (``run/``, ``logs/``, ``deploy/``) nor from ``tasks/``: a task arrives as an argument."""
