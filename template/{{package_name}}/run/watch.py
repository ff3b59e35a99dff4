"""Health checks at every log row (``train.log_every``), so no step pays for them: skipped updates
(half a window: a warning, all: an error), non-finite weights or loss in fp32, no finite loss at all."""

from __future__ import annotations

import logging
import math

from mindspore import amp

from ..engine.errors import TrainingError
from ..logs.callbacks import Callback

log = logging.getLogger(__name__)


class Watch(Callback):
    """The checks above, at every log row (first among the callbacks: before anything is logged)."""

    def on_train_begin(self, progress):
        train = progress.cfg.train
        self.check_weights = train.amp_level == "O0" and train.on_nonfinite == "stop"
        self.start = (progress.step, progress.skipped_steps)  # at the start of the window
        self.finite_rows = self.rows = 0

    def on_step_end(self, progress, logs):
        step, skipped = logs["step"], logs["skipped_steps"]
        (first, skipped0), steps = self.start, step - self.start[0]
        self.start, skipped = (step, skipped), skipped - skipped0
        when = f"step {step}" if steps == 1 else f"steps {first + 1}-{step}"
        finite_loss = math.isfinite(logs["loss"])
        self.rows, self.finite_rows = self.rows + 1, self.finite_rows + finite_loss
        if self.check_weights and not bool(amp.all_finite(progress.parameters).asnumpy()):
            raise TrainingError(f"the weights became NaN/inf at {when}: stopped (nothing non-finite is saved); "
                                "lower optim.lr, set train.grad_clip, or set train.on_nonfinite=skip to skip "
                                "updates whose gradients are not finite")
        if self.check_weights and not finite_loss:
            raise TrainingError(f"the loss is {logs['loss']} at {when}: stopped; check the data of those steps, "
                                "lower optim.lr or set train.grad_clip")
        if steps >= 2 and skipped == steps:
            raise TrainingError(f"all {steps} updates of {when} were skipped (gradients overflowed or were not "
                                "finite): nothing is being trained; lower train.loss_scale or optim.lr, or use "
                                "train.amp_level=O0")
        if skipped * 2 > steps:
            log.warning(f"warning: {skipped} of the last {steps} updates were skipped (overflow or non-finite)")

    def on_train_end(self, progress, summary):
        if self.rows and not self.finite_rows:
            raise TrainingError(f"no logged loss of this run was finite ({self.rows} rows): nothing was learnt; "
                                "lower optim.lr or train.loss_scale, or use train.amp_level=O0")
