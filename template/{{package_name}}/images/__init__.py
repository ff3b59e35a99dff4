"""Reading images (decode, folders and files streamed through mindspore.dataset, transforms):
rendered only in projects whose task reads images."""
