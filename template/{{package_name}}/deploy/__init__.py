"""Trained models out of the loop: evaluation of a checkpoint, MINDIR export with its spec,
and weights imported from other frameworks."""
