"""The task's networks: ``gpt.py`` (GPT-2's layers), ``decoder.py`` (one configurable decoder for
the Llama-descended families; its parts in ``layers.py`` and ``rope.py``) and ``lora.py``
(low-rank adapters on its projections)."""
