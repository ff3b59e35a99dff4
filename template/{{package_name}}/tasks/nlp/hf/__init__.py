"""Hugging Face interop: ``importer.py`` reads a model folder of any family in ``layouts/`` and
``exporter.py`` writes one back (``export.py --format hf | peft``); ``gpt2.py`` does both for
GPT-2; ``shards.py`` reads safetensors shards tensor by tensor."""
