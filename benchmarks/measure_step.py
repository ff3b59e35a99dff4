"""One measurement in a fresh process, run inside a generated project (cwd = project root).

    python measure_step.py PACKAGE [--set k=v ...] [--steps N] [--framework-loop] [--accum K]

Prints one JSON line: ms per optimizer step (median of timed steps after warm-up), time from
process start to the first finished step, and the model FLOPs per step when the task
reports them. Called by bench_train.py; not a test.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time

import psutil

START = psutil.Process().create_time()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("package")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--framework-loop", action="store_true", help="time mindspore.Model.train in GRAPH_MODE")
    args = p.parse_args()
    sys.path.insert(0, ".")
    tasks = importlib.import_module(f"{args.package}.tasks")
    cfg = tasks.load_config("config/config.yaml", ["output.plot=false", *args.overrides])
    loop = importlib.import_module(f"{args.package}.engine.loop")
    trainer = loop.setup(cfg, tasks.get_task(cfg.task))  # the run set up as train.py does, not trained
    k = cfg.train.grad_accum_steps
    batches = list(trainer.batches.epoch(0))
    if args.framework_loop:
        result = framework_loop(trainer, batches, args)
    else:
        result = our_loop(trainer, batches, k, args)
        if cfg.task == "nlp":
            result["flops_per_step"] = lm_flops(trainer)
    print(json.dumps(result))


def lm_flops(trainer) -> float:
    """Model FLOPs of one LM optimizer step: 6 per parameter per token (forward + backward,
    the tied output projection included) plus the attention score and value matmuls."""
    m, train = trainer.cfg.model, trainer.cfg.train
    tokens = train.batch_size * train.grad_accum_steps * m.block_size
    params = sum(p.size for p in trainer.network.trainable_params() if "position" not in p.name)
    return 6 * params * tokens + 12 * m.n_layer * tokens * m.block_size * m.d_model


def our_loop(trainer, batches, k, args) -> dict:
    times, first = [], None
    n = 0
    for _ in range(args.warmup + args.steps):
        tick = time.perf_counter()
        for _ in range(k):
            loss, finite = trainer.step_fn(batches[n % len(batches)], apply=(n + 1) % k == 0)
            finite.asnumpy()
            n += 1
        if first is None:
            first = time.time() - START
        times.append(time.perf_counter() - tick)
    return {"ms_per_step": 1000 * statistics.median(times[args.warmup:]), "first_step_s": first}


def framework_loop(trainer, batches, args) -> dict:
    """The same loss Cell and optimizer through MindSpore's own Model.train (GRAPH_MODE)."""
    import mindspore as ms
    from mindspore import dataset as ds

    ms.set_context(mode=ms.GRAPH_MODE)
    # Model.train feeds the columns to the loss Cell by position: only their number matters (a
    # task's train data may be a dict of arrays or a TrainSource such as the recommender's PairSource).
    columns = [f"input{i}" for i in range(len(batches[0]))]
    rows = [tuple(t.asnumpy() for t in batch) for batch in batches]
    total = args.warmup + args.steps
    source = ds.GeneratorDataset(lambda: (rows[i % len(rows)] for i in range(total)), columns)
    times = []

    class Timer(ms.train.Callback):
        def on_train_step_begin(self, run_context):
            self.tick = time.perf_counter()

        def on_train_step_end(self, run_context):
            times.append(time.perf_counter() - self.tick)

    model = ms.train.Model(trainer.step_fn.loss_net, optimizer=trainer.optimizer)
    model.train(1, source, callbacks=[Timer()], dataset_sink_mode=False)
    return {"ms_per_step": 1000 * statistics.median(times[args.warmup:]), "first_step_s": None}


if __name__ == "__main__":
    main()
