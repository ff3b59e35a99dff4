"""Networks more than one task builds on (``backbones.py``: image backbones by name), MindSpore cells
only: nothing here imports the rest of the package; a task puts its head and loss on them."""
