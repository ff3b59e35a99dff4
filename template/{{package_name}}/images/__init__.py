"""Reading images: ``arrays.py`` (an .npz, your loader's arrays), ``decode.py`` (files, with Pillow),
``files.py`` (files streamed through mindspore.dataset) and ``rng.py`` (an image's random draws).
Rendered for the tasks that read images; in vision, all but the first are optional features'."""
