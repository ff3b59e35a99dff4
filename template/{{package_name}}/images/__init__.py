"""Reading images: ``arrays.py`` (an .npz, your loader's arrays), ``decode.py`` (files, with
Pillow) and ``files.py`` (files streamed through mindspore.dataset). Rendered for the tasks that
read images; in vision, the last two are the ``folders`` feature."""
