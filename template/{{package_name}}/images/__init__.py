"""Reading images: ``arrays.py`` (an .npz, your loader's arrays), ``decode.py`` and ``files.py`` (image
files, streamed through mindspore.dataset; in vision, the ``folders`` feature)."""
