"""Your learning-rate schedules. Name one in config/config.yaml:

    optim:
      schedule: custom.optim:linear  # fn(step, total_steps) -> factor of optim.lr (after warmup)

An optimizer is named the same way: ``optim.name: mindspore.nn:RMSProp``, or your own
``nn.Optimizer`` subclass here, built as ``Class(params, learning_rate=, weight_decay=, **optim.kwargs)``.
"""


def linear(step: float, total_steps: int) -> float:
    """From 1 at the first step down to 0 at the last."""
    return 1 - step / max(total_steps, 1)
