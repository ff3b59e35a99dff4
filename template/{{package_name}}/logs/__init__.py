"""What a run reports (console, ``train.log``, metric loggers), through the loop's read-only ``Progress``."""
