"""In-place updates of parameters and buffers that compile inside ``ms.jit`` on MindSpore 2.7-2.10.

``ops.assign``/``ops.assign_add`` are deprecated ("removed after version 2.9.0"); ``Tensor.copy_`` is
their successor. Not ``Tensor.add_``/``zero_``: on CPU, 2.7.2's jit dropped ``add_``'s write (1 + 1
gave 1) and has no ``zero_`` kernel.
"""

from mindspore import ops


def add_to(target, value):
    """target += value."""
    return target.copy_(target + value)


def zero(target):
    """target = 0."""
    return target.copy_(ops.zeros_like(target))
