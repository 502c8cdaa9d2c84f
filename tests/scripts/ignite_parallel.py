"""An Ignite script as its docs write one: ``idist.Parallel(backend=..., nproc_per_node=...)`` runs ``training``
in every process, and starts them itself when ``--nproc_per_node`` is given (otherwise it takes torchrun's
variables). A trainer ``Engine`` prints each iteration's loss, an evaluator the validation loss after each epoch."""

import argparse

import ignite.distributed as idist
import torch
from ignite.engine import Events, create_supervised_evaluator, create_supervised_trainer
from ignite.metrics import Loss
from torch import nn
from torch.utils.data import TensorDataset


def training(local_rank, config):
    rank = idist.get_rank()
    torch.manual_seed(config["seed"])
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=gen)
    y = (x[:, 0] > 0).long()
    train_loader = idist.auto_dataloader(TensorDataset(x[:192], y[:192]), batch_size=config["batch_size"],
                                         shuffle=True, drop_last=True)
    val_loader = idist.auto_dataloader(TensorDataset(x[192:], y[192:]), batch_size=config["batch_size"])
    model = idist.auto_model(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    optimizer = idist.auto_optim(torch.optim.SGD(model.parameters(), lr=0.1))
    criterion = nn.CrossEntropyLoss()
    trainer = create_supervised_trainer(model, optimizer, criterion, device=idist.device())
    evaluator = create_supervised_evaluator(model, metrics={"loss": Loss(criterion)}, device=idist.device())

    @trainer.on(Events.ITERATION_COMPLETED)
    def log_loss(engine):
        print(f"rank {rank} Epoch[{engine.state.epoch}] Iteration[{engine.state.iteration}] "
              f"Loss: {engine.state.output:.4f}", flush=True)

    @trainer.on(Events.EPOCH_COMPLETED)
    def validate(engine):
        evaluator.run(val_loader)
        if rank == 0:
            print(f"Validation Results - Epoch: {engine.state.epoch} Avg loss: "
                  f"{evaluator.state.metrics['loss']:.4f}", flush=True)

    trainer.run(train_loader, max_epochs=config["epochs"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default=None)
    parser.add_argument("--nproc_per_node", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    with idist.Parallel(backend=args.backend, nproc_per_node=args.nproc_per_node) as parallel:
        parallel.run(training, vars(args))


if __name__ == "__main__":
    main()
