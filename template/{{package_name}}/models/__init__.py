"""Networks more than one task builds on. ``backbones.py`` is the registry of image backbones by name
(what ``model.arch`` of vision and ``model.image_tower`` of multimodal pick from), filled by the arch
modules' own entries (``registry.py``). Nothing here imports the rest of the package: a model is
MindSpore cells, and a task puts its head and loss on it.
"""
