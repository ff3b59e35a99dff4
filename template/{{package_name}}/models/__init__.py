"""Networks more than one task builds on (``backbones.py``: image backbones by name, each arch module
adding its own), MindSpore cells only: nothing here imports the rest of the package."""
