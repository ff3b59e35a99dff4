"""What a run reports: the console and ``train.log``, the metric loggers, the callback base and
the curve plot. It sees the run only through the loop's read-only ``Progress``."""
