"""In-place updates that compile inside ``ms.jit`` on MindSpore 2.7-2.10 (``ops.assign`` is deprecated;
not ``add_``/``zero_``: on CPU, 2.7.2's jit dropped ``add_``'s write and has no ``zero_``)."""

from mindspore import ops


def add_to(target, value):
    return target.copy_(target + value)


def zero(target):
    return target.copy_(ops.zeros_like(target))
