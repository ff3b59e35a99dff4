"""Running the loop as a program: the command lines, ``train()`` with its layers, the run
folder's manifest and the health watch. The core (``engine/``) never imports this."""
