"""What the loop checks at every log row (``train.log_every``), so no step pays for it.

- Skipped updates (an fp16 overflow, or a non-finite gradient with ``train.on_nonfinite: skip``):
  more than half of the window is a warning, all of it an error (nothing is being trained).
- In fp32 with ``train.on_nonfinite: stop``: weights that became NaN/inf stop the run with one
  line naming the step (to within the window), before anything non-finite is saved.
"""

from __future__ import annotations

from collections.abc import Callable

from mindspore import amp

from .errors import TrainingError
from .schema import Train


class Watch:
    def __init__(self, cfg: Train, parameters, say: Callable[[str], None]):
        self.parameters = parameters
        self.check_weights = cfg.amp_level == "O0" and cfg.on_nonfinite == "stop"
        self.say = say
        self.start = (0, 0)  # (step, skipped steps) at the start of the window

    def reset(self, step: int, skipped: int) -> None:
        self.start = (step, skipped)

    def check(self, step: int, skipped: int) -> None:
        (first, skipped0), steps = self.start, step - self.start[0]
        self.start, skipped = (step, skipped), skipped - skipped0
        when = f"step {step}" if steps == 1 else f"steps {first + 1}-{step}"
        if self.check_weights and not bool(amp.all_finite(self.parameters).asnumpy()):
            raise TrainingError(f"the weights became NaN/inf at {when}: stopped (nothing non-finite is saved); "
                                "lower optim.lr, set train.grad_clip, or set train.on_nonfinite=skip to skip "
                                "updates whose gradients are not finite")
        if steps >= 2 and skipped == steps:
            raise TrainingError(f"all {steps} updates of {when} were skipped (gradients overflowed or were not "
                                "finite): nothing is being trained; lower train.loss_scale or optim.lr, or use "
                                "train.amp_level=O0")
        if skipped * 2 > steps:
            self.say(f"warning: {skipped} of the last {steps} updates were skipped (overflow or non-finite)")
