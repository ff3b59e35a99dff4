"""The task's data: ``load.py`` turns the config into training and evaluation data (text windows
or chat/instruct examples); ``corpus.py`` reads text, ``tokenizer.py`` maps it to ids (and
needs no MindSpore: serving uses it), ``tokenfile.py`` caches the ids on disk, ``chat.py``
renders chat templates and ``conversations.py`` turns chat files into masked examples."""

from .tokenizer import Tokenizer

__all__ = ["Tokenizer"]
