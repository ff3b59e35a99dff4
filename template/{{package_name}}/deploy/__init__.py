"""Trained models out of the loop: a checkpoint's evaluation, its export with a spec, imported weights."""
