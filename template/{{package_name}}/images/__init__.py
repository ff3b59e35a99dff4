"""Reading images: ``arrays.py`` (an .npz, your loader's arrays), ``decode.py`` and ``files.py`` (image
files, streamed through mindspore.dataset), ``rng.py`` (an image's random draws); in vision, all but
the first are optional features'."""
