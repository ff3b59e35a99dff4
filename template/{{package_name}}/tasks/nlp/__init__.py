"""NLP: a decoder-only Transformer language model over characters, UTF-8 bytes or byte-level BPE tokens;
metric: validation loss and perplexity, beside the unigram baseline. ``generate.py`` samples text.

Default data: Python's own documentation text (the standard library's ``pydoc_data.topics``,
~465k characters), read at run time. Your own data: a UTF-8 text file or a folder of ``.txt`` files.
"""

from .config import TaskConfig


def load():
    from .task import TASK  # imports MindSpore: only after the runtime is set up

    return TASK


__all__ = ["TaskConfig", "load"]
