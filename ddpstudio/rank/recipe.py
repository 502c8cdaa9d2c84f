"""The built-in recipe, run once per rank: ``python -m ddpstudio.rank.recipe PLAN.json``.

DistributedSampler with set_epoch, DDP wrap, global loss averaged across
ranks (read from the device at report points: rank/reporting.py), precision by
device (rank/precision.py), samples/s, time waiting for data, checkpoint on rank 0 after a barrier
each epoch, resume with the right map_location. Also runs under torchrun
(``--init-method env://``), which the overhead benchmark relies on.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
import traceback
from contextlib import nullcontext
from datetime import timedelta

from ddpstudio.core import protocol
from ddpstudio.core.checkpoint import CheckpointError
from ddpstudio.core.launch.hangwatch import BACKWARD, CHECKPOINT, DATA, EVAL, EXCHANGE, FORWARD, OPTIMIZER
from ddpstudio.core.plan import Plan, RecipeSpec
from ddpstudio.rank import balance, exchangecount, stopwatch
from ddpstudio.rank.baddata import DataProblem, stated_message
from ddpstudio.rank.emit import Emitter, rank_from_env
from ddpstudio.rank.heartbeat import Heartbeat, Marked, heartbeat

BALANCE_PROBES = 3  # timed forward/backward passes per rank before its batch is sized (after one warm-up)
DIVERGED_HINT = ("Likely causes: a learning rate too high (this run uses {lr:g}; try 10x lower), "
                 "or NaN/inf values in the data.")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ddpstudio.rank.recipe")
    p.add_argument("plan")
    p.add_argument("--init-method", help="override the plan's init method (e.g. env:// under torchrun)")
    return p.parse_args(argv)


class Trainer:
    def __init__(self, plan: Plan, init_method: str, emitter: Emitter) -> None:
        import torch

        self.plan, self.spec, self.emit = plan, plan.recipe or RecipeSpec(), emitter
        self.rank = rank_from_env()
        self.world_size = int(os.environ.get("WORLD_SIZE", plan.world_size))
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
        self.init_method = init_method
        if plan.device == "cuda":
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            torch.set_num_threads(max(1, self.spec.threads))
            self.device = torch.device("cpu")

    def setup(self) -> None:
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler

        from ddpstudio.core.dataworkers import workers_in_rank
        from ddpstudio.rank import precision
        from ddpstudio.rank.bnstats import calibration_loader
        from ddpstudio.rank.data import SyntheticImages, SyntheticIndices
        from ddpstudio.rank.evaluate import make_loader
        from ddpstudio.rank.hoststore import with_host_store
        from ddpstudio.rank.models import build_model
        from ddpstudio.rank.reporting import Reporter
        from ddpstudio.rank.splits import build_splits

        # Until here the rank was starting Python and importing torch; from here it waits for the others.
        self.emit.emit(protocol.RANK_MEETING, pid=os.getpid())
        # Several machines: the host's store, as a client without libuv (rank/hoststore.py, pytorch #148283).
        dist.init_process_group(**with_host_store(dict(
            backend=self.plan.backend,
            init_method=self.init_method,
            rank=self.rank,
            world_size=self.world_size,
            timeout=timedelta(seconds=self.plan.rendezvous_timeout),
        )))
        if self.plan.backend == "gloo":
            from ddpstudio.rank.gloo_exit import settle_at_exit

            settle_at_exit()  # no abort at exit after a last all-reduce (rank/gloo_exit.py)
        self.emit.emit(protocol.RANK_JOINED, pid=os.getpid(), device=str(self.device),
                       grad_exchange=self.plan.grad_exchange, grad_compression=self.plan.grad_compression,
                       global_rank=dist.get_rank(), local_rank=self.local_rank, group_size=dist.get_world_size())
        spec = self.spec
        torch.manual_seed(spec.seed)
        splits = build_splits(spec)
        dataset, self.class_names = splits.train, splits.class_names
        classes = len(self.class_names)
        self.workers = workers_in_rank(spec.workers, self.plan.ranks_per_node, spec.data)
        self.val_loader = make_loader(splits.val, self.rank, self.world_size, spec.batch_size, self.workers,
                                      pin=self.device.type == "cuda")
        self.calibration = calibration_loader(splits.train, self.rank, self.world_size, spec.batch_size)
        if self.rank == 0:
            self.emit.emit(protocol.LOG, stream="recipe", line=f"validation: {splits.source}")
        if len(dataset) == 0:
            raise ValueError(f"the dataset in {spec.data_dir} has no samples")
        # Synthetic data: the loader gives indices, the images are built on the device (rank/data.py).
        self.synthetic = dataset if isinstance(dataset, SyntheticImages) else None
        source = SyntheticIndices(dataset) if self.synthetic else dataset
        # Mixed GPUs (issue 25 §1): each rank's slice of every global batch, sized after the first steps.
        self.balanced = spec.balance == "measured" and self.world_size > 1
        self.share, self.weight = spec.batch_size, 1.0
        self.slow = balance.slow_seconds(self.rank)  # the test/benchmark seam for a slower rank
        if self.balanced:
            self.sampler = balance.ShareSampler(len(source), [spec.batch_size] * self.world_size, self.rank,
                                                spec.seed)
        else:
            self.sampler = DistributedSampler(source, num_replicas=self.world_size, rank=self.rank,
                                              shuffle=True, seed=spec.seed, drop_last=True)
        # Pinned on CUDA, synthetic indices too: a copy from pageable memory waits for the device's whole
        # queue first (CUDA Runtime API, "API synchronization behavior": "For transfers from pageable host
        # memory to device memory, a stream sync is performed before the copy is initiated"). On an H200 the
        # difference was within the noise (benchmarks/recipe_ladder.py: pinned 0.816/0.821 of the tight loop,
        # pageable 0.852/0.854, resnet18/resnet50), so this follows the documented behaviour, not a measured gain.
        batching = (dict(batch_sampler=self.sampler) if self.balanced
                    else dict(batch_size=spec.batch_size, sampler=self.sampler, drop_last=True))
        self.loader = DataLoader(source, **batching, num_workers=self.workers, pin_memory=self.device.type == "cuda",
                                 persistent_workers=self.workers > 0)
        self.accumulate = max(1, spec.accumulate)
        # An optimizer step takes `accumulate` micro-batches; an epoch's remainder (fewer) is left out,
        # so with drop_last a step sees exactly the samples one batch of batch x accumulate would.
        self.steps_per_epoch = len(self.loader) // self.accumulate
        if self.steps_per_epoch == 0:
            accumulated = f" x {self.accumulate} micro-batches" if self.accumulate > 1 else ""
            raise DataProblem(  # checked before the start too (core/recipefit.py); the data may have changed
                f"{len(dataset)} samples are too few for {self.world_size} ranks x batch {spec.batch_size}"
                f"{accumulated}; lower the batch size or add data")
        model = build_model(spec.model, classes, spec.image_size).to(self.device)
        self.precision = precision.for_model(model, self.device.type, spec.amp)
        if self.precision.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.exchanges = None
        if self.world_size == 1:  # nothing to exchange: the bare model (rank/onerank.py)
            from ddpstudio.rank.onerank import OneRank

            self.model = OneRank(model)
            if exchangecount.enabled():
                self.exchanges = exchangecount.ExchangeCount()  # stays 0: one rank never exchanges
        else:
            self.model = self._ddp(model)
        # The linear scaling rule against the effective batch: one micro-batch's lr x ranks x accumulate.
        self.lr = spec.lr * (self.world_size * self.accumulate if spec.scale_lr else 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.lr, momentum=0.9, weight_decay=1e-4)
        self.autocast_dtype = getattr(torch, self.precision.autocast) if self.precision.autocast else None
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.precision.grad_scaler)
        if self.rank == 0:
            self.emit.emit(protocol.LOG, stream="recipe", line=f"precision: {self.precision.reason}")
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.epoch, self.skip, self.global_step = 0, 0, 0
        self.reporter = Reporter(self.emit, self.rank, self.world_size, self.plan.grad_exchange,
                                 spec.batch_size * self.accumulate, spec.log_every)
        self.current_lr, self.evaluated_at = self.lr, -1
        if spec.resume:
            self._resume()
        # The step and phase for the launcher's hang watch (rank/heartbeat.py); unwatched, marks go nowhere.
        self.beat = heartbeat() or Heartbeat()
        self.val_loader = Marked(self.val_loader, self.beat, EVAL)
        self.calibration = Marked(self.calibration, self.beat, EVAL)

    def _ddp(self, model):
        """``model`` in DistributedDataParallel, with the plan's gradient exchange registered."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        from ddpstudio.rank.staged import register

        # gradient_as_bucket_view: gradients live in DDP's buckets, no copy back out of them each step.
        # No buffer sync before each forward: no broadcast of rank 0's BatchNorm buffers before every forward (a
        # collective per step); the statistics are recomputed over all ranks before each evaluation and
        # checkpoint instead (rank/bnstats.py), and training-mode BatchNorm does not read them.
        # torch 2.14 renamed the switch (distributed.py: "`broadcast_buffers` is deprecated. Use
        # `forward_sync_buffers` instead", a FutureWarning on every rank's stderr); older torch lacks it.
        device_ids = [self.local_rank] if self.device.type == "cuda" else None
        if "forward_sync_buffers" in inspect.signature(DDP.__init__).parameters:
            ddp = DDP(model, device_ids=device_ids, gradient_as_bucket_view=True, forward_sync_buffers=False)
        else:
            ddp = DDP(model, device_ids=device_ids, gradient_as_bucket_view=True, broadcast_buffers=False)
        # Tests count the exchanges through a hook wrapper (rank/exchangecount.py); runs register as always.
        if exchangecount.enabled():
            self.exchanges = exchangecount.register_counted(ddp, self.plan.grad_exchange, self.plan.grad_compression)
        else:
            register(ddp, self.plan.grad_exchange, self.plan.grad_compression)
        return ddp

    # -- checkpoints -----------------------------------------------------
    def _resume(self) -> None:
        from ddpstudio.rank.checkpoint import checkpoint_path, layout, load

        state, info = load(self.spec.checkpoint_dir, self.device, self.spec.model)
        if layout(state["model"]) != layout(self.model.module.state_dict()):
            raise CheckpointError(f"{checkpoint_path(self.spec.checkpoint_dir)} holds a {info.model} with another "
                                  "layout (a different number of classes?); resume with the same data, or use "
                                  "another checkpoint folder")
        self.model.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:  # the saved state brings its lr; this run's --lr wins
            group["lr"] = self.lr
        if state["scaler"] and self.scaler.is_enabled():  # a bf16 or CPU run saved a disabled scaler: {}
            self.scaler.load_state_dict(state["scaler"])
        self.global_step = state["global_step"]
        self.epoch = state["epoch"] + (1 if state["epoch_complete"] else 0)
        self.skip = 0 if state["epoch_complete"] else state["step_in_epoch"]
        if self.rank == 0:
            self.emit.emit(protocol.LOG, stream="recipe",
                           line=f"resumed from {checkpoint_path(self.spec.checkpoint_dir)} at {info.where()}")

    def _save(self, epoch: int, step_in_epoch: int, complete: bool) -> None:
        import torch.distributed as dist

        from ddpstudio.rank.checkpoint import checkpoint_path, layout, remove_partial, save_atomic

        if not self.spec.checkpoint_dir:
            return
        self.beat.mark(CHECKPOINT)
        self._check_weights_finite()  # every rank holds the same weights, so all agree before the barrier
        dist.barrier()  # every rank has finished the step we are about to record
        if self.rank == 0:
            remove_partial(self.spec.checkpoint_dir)
            state = self.model.module.state_dict()
            path = save_atomic(
                {"model": state, "optimizer": self.optimizer.state_dict(),
                 "scaler": self.scaler.state_dict(), "epoch": epoch, "step_in_epoch": step_in_epoch,
                 "epoch_complete": complete, "global_step": self.global_step,
                 "model_name": self.spec.model, "world_size": self.world_size, "accumulate": self.accumulate},
                checkpoint_path(self.spec.checkpoint_dir),
                info={"model": self.spec.model, "layout": layout(state), "global_step": self.global_step,
                      "epoch": epoch, "step_in_epoch": step_in_epoch, "epoch_complete": complete,
                      "world_size": self.world_size, "epochs": self.spec.epochs, "max_steps": self.spec.max_steps,
                      "accumulate": self.accumulate})
            self.emit.emit(protocol.CHECKPOINT_SAVED, path=str(path), epoch=epoch, step=self.global_step)
        dist.barrier()

    def _check_weights_finite(self) -> None:
        import torch

        for name, param in self.model.module.named_parameters():
            if not torch.isfinite(param).all():
                raise FloatingPointError(
                    f"weight {name} became NaN or infinite by step {self.global_step}; the checkpoint is not "
                    f"overwritten. {DIVERGED_HINT.format(lr=self.lr)}")

    # -- the loop ----------------------------------------------------------
    def _autocast(self):
        import torch

        return torch.autocast(self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None)

    def _to_device(self, images, labels):
        import torch

        labels = labels.to(self.device, non_blocking=True)
        if self.synthetic is not None:  # the loader gave sample indices: build their images here
            images = self.synthetic.batch(images.to(self.device, non_blocking=True))
        else:
            images = images.to(self.device, non_blocking=True)
        if self.precision.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return images, labels

    def _train_step(self, it):
        """One optimiser step over ``accumulate`` micro-batches drawn from ``it``; returns (the loss, the mean over
        the micro-batches, as a tensor on the device: reading it would wait for the GPU; seconds waiting for data).

        Every micro-batch but the last runs forward and backward inside DDP's ``no_sync()``: gradients add up in
        place and only the last backward exchanges them (torch/nn/parallel/distributed.py ``no_sync``: "The
        forward pass should be included inside the context manager, or else gradients will still be
        synchronized"). Each loss is divided by ``accumulate``, so the sum is the gradient of the mean over all
        of them: the gradient of one batch ``accumulate`` times as big (exactly so without BatchNorm).
        """
        from ddpstudio.rank import schedule

        self.current_lr = schedule.lr_at(self.global_step, self.lr, self.spec.lr_schedule,
                                         self.spec.warmup_steps, self._total_steps())
        schedule.apply(self.optimizer, self.current_lr)
        self.optimizer.zero_grad(set_to_none=True)
        n, total, waited, beat = self.accumulate, None, 0.0, self.beat
        for i in range(n):
            beat.mark(DATA, self.global_step + 1)
            t_wait = time.perf_counter()
            images, labels = next(it)
            waited += time.perf_counter() - t_wait
            images, labels = self._to_device(images, labels)
            beat.mark(FORWARD)
            with self.model.no_sync() if i < n - 1 else nullcontext():
                with self._autocast():
                    loss = self.loss_fn(self.model(images), labels)
                balance.slow_down(self.slow, len(labels))
                beat.mark(BACKWARD)  # the last micro-batch's backward also exchanges the gradients
                if self.balanced:  # share x world / global: DDP's average is then the global batch's mean
                    loss = loss * self.weight
                self.scaler.scale(loss / n if n > 1 else loss).backward()
            total = loss.detach() if total is None else total + loss.detach()
        beat.mark(OPTIMIZER)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return (total / n if n > 1 else total), waited

    def _balance(self) -> None:
        """Time a few forward/backward passes of this rank's first batch (no exchange, no optimizer step: the
        weights stay as they are), share the times over all ranks, and give each rank its part of the global
        batch (rank/balance.py).

        On CUDA a rank's share is also capped by its memory: the probe's peak allocation per sample, against
        what the device has free plus what PyTorch's cache holds unused (``torch.cuda.mem_get_info``), with a
        tenth kept back; a GPU that cannot hold its part raises a clear error.
        """
        import torch
        from torch.utils.data import default_collate

        self.beat.mark(FORWARD, self.global_step + 1)
        self.sampler.set_epoch(self.epoch)
        idx = next(iter(self.sampler))
        images, labels = self._to_device(*default_collate([self.loader.dataset[i] for i in idx]))
        buffers = {k: v.detach().clone() for k, v in self.model.module.named_buffers()}  # BatchNorm's statistics
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            base = torch.cuda.memory_allocated(self.device)
        n = len(idx)
        half = max(1, n // 2)
        t_full = self._probe(images, labels, BALANCE_PROBES + 1)  # one more: the first pass warms up
        t_half = self._probe(images[:half], labels[:half], BALANCE_PROBES) if half < n else t_full
        self.optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            for name, value in self.model.module.named_buffers():
                value.copy_(buffers[name])
        cap = None
        if cuda:
            per_sample_bytes = max(1, torch.cuda.max_memory_allocated(self.device) - base) / n
            free, _ = torch.cuda.mem_get_info(self.device)
            unused_cache = torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
            cap = max(1, int(0.9 * (free + unused_cache) / per_sample_bytes))
        per_sample, overhead = balance.fit(n, t_full, half, t_half)
        per_sample, overhead, caps = balance.gather(per_sample, overhead, cap, self.device, self.plan.grad_exchange)
        try:
            shares = balance.split(per_sample, self.spec.batch_size * self.world_size, caps, overhead)
        except ValueError as exc:
            raise DataProblem(str(exc)) from None
        self.sampler.set_shares(shares)
        self.share = shares[self.rank]
        self.weight = balance.loss_weight(self.share, self.world_size, sum(shares))
        if self.rank == 0:
            self.emit.emit(protocol.BATCH_BALANCED, rank=None, batches=shares, seconds_per_sample=per_sample,
                           seconds_per_step=overhead, memory_caps=caps,
                           reason=balance.describe(shares, per_sample, overhead, caps))

    def _probe(self, images, labels, passes: int) -> float:
        """The median seconds of the last ``BALANCE_PROBES`` of ``passes`` forward/backward passes, under
        ``no_sync()`` (no exchange: the time is this rank's alone, not its wait for a slower peer)."""
        import torch

        seconds = []
        for _ in range(passes):
            t0 = time.perf_counter()
            with self.model.no_sync():
                with self._autocast():
                    loss = self.loss_fn(self.model(images), labels)
                balance.slow_down(self.slow, len(labels))
                loss.backward()
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            seconds.append(time.perf_counter() - t0)
        last = sorted(seconds[-BALANCE_PROBES:])
        return last[len(last) // 2]  # the median: one slow pass (a page fault, a GC) does not decide

    def _done(self) -> bool:
        return self.spec.max_steps is not None and self.global_step >= self.spec.max_steps

    def _report(self) -> list:
        """Read, check and report the pending steps (a collective: every rank calls it at the same steps)."""
        self.beat.mark(EXCHANGE)
        return self.reporter.flush(
            {"steps_per_epoch": self.steps_per_epoch, "total_steps": self._total_steps()},
            DIVERGED_HINT.format(lr=self.lr))

    def run(self) -> None:
        from ddpstudio.rank.reporting import Pending

        spec, batch = self.spec, self.spec.batch_size * self.accumulate  # samples per optimizer step and rank
        if self.balanced:
            self._balance()
        while self.epoch < spec.epochs and not self._done():
            epoch = self.epoch
            self.sampler.set_epoch(epoch)
            self.model.train()
            t_epoch, wait_total, loss_sum, n = time.perf_counter(), 0.0, 0.0, 0
            step_in_epoch = 0
            it = iter(self.loader)
            t_prev = time.perf_counter()
            self.reporter.restart_clock()
            for step_in_epoch in range(self.steps_per_epoch):  # optimizer steps
                if step_in_epoch < self.skip:  # resuming mid-epoch: same order, skip what was done
                    self.beat.mark(DATA, self.global_step + 1)
                    for _ in range(self.accumulate):
                        next(it)
                    t_prev = time.perf_counter()
                    continue
                loss, waited = self._train_step(it)
                self.global_step += 1
                now = time.perf_counter()
                dt, t_prev = now - t_prev, now
                wait_total, n = wait_total + waited, n + 1
                self.reporter.add(Pending(self.global_step, epoch, loss, self.current_lr, time.time(), dt, waited,
                                          self.exchanges.count if self.exchanges is not None else None))
                evaluate = bool(spec.eval_every and self.global_step % spec.eval_every == 0)
                last = self._done() or step_in_epoch == self.steps_per_epoch - 1
                save = bool(spec.checkpoint_every and self.global_step % spec.checkpoint_every == 0 and not last)
                if self.reporter.due or evaluate or last or save:  # the same steps on every rank
                    loss_sum += sum(r.mean_loss for r in self._report())
                if evaluate:
                    self._evaluate(epoch)
                if save:  # between optimizer steps: never mid-accumulation (the epoch's end saves below)
                    self._save(epoch, step_in_epoch + 1, False)
                if evaluate or save:
                    t_prev = time.perf_counter()
                    self.reporter.restart_clock()
                if self._done():
                    break
            self.skip = 0
            loss_sum += sum(r.mean_loss for r in self._report())  # nothing pending after a full epoch
            duration = time.perf_counter() - t_epoch
            complete = step_in_epoch == self.steps_per_epoch - 1
            if self.rank == 0:
                self.emit.emit(protocol.EPOCH_END, rank=None, epoch=epoch, loss=loss_sum / n if n else 0.0,
                               duration_s=duration,
                               samples_per_s=self.world_size * batch * n / duration if duration else None,
                               data_wait_fraction=wait_total / duration if duration else 0.0,
                               complete=complete)
            self._evaluate(epoch)
            self._save(epoch, step_in_epoch + 1, complete)
            self.epoch += 1
        self._save_model()

    def _evaluate(self, epoch: int) -> None:
        """Loss and accuracy on the validation set, over all ranks; once per step at most."""
        from ddpstudio.rank import bnstats
        from ddpstudio.rank.evaluate import evaluate

        if self.evaluated_at == self.global_step:
            return
        self.beat.mark(EVAL)
        self.evaluated_at, t0 = self.global_step, time.perf_counter()
        # BatchNorm's running statistics lag the weights: recompute them first (rank/bnstats.py).
        bnstats.recompute(self.model.module, self.calibration, self.device, self.plan.grad_exchange,
                          self._autocast())
        result = evaluate(self.model.module, self.val_loader, self.device, len(self.class_names),
                          self.rank, self.world_size, self.plan.grad_exchange)
        if self.rank == 0:
            self.emit.emit(protocol.EVAL, rank=None, step=self.global_step, epoch=epoch, loss=result.loss,
                           top1=result.top1, top5=result.top5, samples=result.samples,
                           duration_s=time.perf_counter() - t0)

    def _save_model(self) -> None:
        """The final weights for prediction (``model.pt``) beside the checkpoint, by rank 0."""
        from ddpstudio.rank.export_model import save_model

        if self.spec.checkpoint_dir and self.rank == 0:
            path = save_model(self.model.module, self.spec.checkpoint_dir, self.spec.model, self.class_names,
                              self.spec.image_size)
            self.emit.emit(protocol.MODEL_SAVED, rank=None, path=str(path), step=self.global_step)

    def _total_steps(self) -> int:
        total = self.steps_per_epoch * self.spec.epochs
        return min(total, self.spec.max_steps) if self.spec.max_steps else total

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


# Errors about the user's data or checkpoint whose message says what is wrong and what to do: the root cause
# is the message alone (no traceback of ours on the console; a few lines in the rank's log).
STATED = (DataProblem, CheckpointError)


def main(argv: list[str] | None = None) -> int:
    from ddpstudio.rank.lifeline import watch_launcher

    watch_launcher()  # before the slow torch import: a launcher killed meanwhile takes us with it
    args = _parse(argv)
    stopwatch.watch()  # the launcher's polite stop: KeyboardInterrupt here, as Ctrl+C would
    emitter = Emitter(rank_from_env())
    trainer = None
    try:
        plan = Plan.read(args.plan)
        trainer = Trainer(plan, args.init_method or plan.init_method, emitter)
        trainer.setup()
        trainer.run()
        trainer.close()
        return 0
    except KeyboardInterrupt:  # Ctrl+C, or the launcher's stop file
        emitter.close()
        traceback.print_exc(limit=3)
        stopwatch.exit_interrupted()
        raise
    except Exception as exc:  # reported as an event, then the traceback goes to stderr too
        if stopwatch.asked():
            # Asked to stop, then a collective failed: a peer stopped first and left it without a
            # partner ("Connection closed by peer"). That is the stop, and this rank ends as stopped.
            emitter.close()
            traceback.print_exc(limit=3)
            print(stopwatch.AFTER_STOP, file=sys.stderr, flush=True)
            stopwatch.exit_interrupted()
        if isinstance(exc, STATED):  # the user's data or checkpoint: the message says it all (rank/baddata.py)
            emitter.emit(protocol.ERROR, message=stated_message(exc), stated=True,
                         traceback=traceback.format_exc(limit=-3))
            traceback.print_exc(limit=-3)  # a few lines for the rank's log; the console shows the message
            return 1
        emitter.emit(protocol.ERROR, message=f"{type(exc).__name__}: {exc}",
                     traceback=traceback.format_exc(limit=20))
        raise
    finally:
        emitter.close()


if __name__ == "__main__":
    sys.exit(main())
