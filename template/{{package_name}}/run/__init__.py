"""Running the loop as a program: command lines, ``train()`` with its layers (manifest, health watch)."""
