"""A real training job that hetsched can preempt: a small neural network (64 inputs, one
hidden layer, 10 classes) learns scikit-learn's handwritten digits (1,797 images of 8 x 8
pixels, shipped with the package: nothing is downloaded) by minibatch SGD, in numpy on
the CPU. A step is one minibatch. It saves its own checkpoint (weights, the random
generator's state, the step) atomically every ``--checkpoint-every`` steps and when
Slurm stops it (SIGTERM), resumes from it when started again, and reports its steps
through ``hetsched.job`` (docs/slurm.md, "Real jobs: hetsched.job")::

    python examples/train_digits.py --steps 3000          # here, about 2 s
    hetsched slurm submit TRACE --format native --script examples/train_digits.py

Under ``hetsched slurm submit --script`` its steps default to its job's work (the
trace's) and its checkpoint goes beside its report, ``$HETSCHED_CHECKPOINTS/
$SLURM_JOB_ID.digits.npz``. Needs scikit-learn for the data: ``pip install -e
".[examples]"``. Exit codes: 0 trained, 143 (130) stopped by SIGTERM (SIGINT) with its
checkpoint saved, 2 bad arguments or an unreadable checkpoint.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from hetsched import job  # light: the standard library only

#: Steps when neither --steps nor the job's work (HETSCHED_WORK) says.
DEFAULT_STEPS = 3000
#: Steps between two saves of the own checkpoint: what a SIGKILL can lose at most.
CHECKPOINT_EVERY = 100
#: Images held out to measure accuracy on (the rest, 1,497, are trained on).
TEST_IMAGES = 300


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None,
                        help=f"Minibatches in all (default: $HETSCHED_WORK, else "
                        f"{DEFAULT_STEPS}).")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="The own checkpoint (default: $HETSCHED_CHECKPOINTS/"
                        "$SLURM_JOB_ID.digits.npz under Slurm, else train_digits.npz).")
    parser.add_argument("--checkpoint-every", type=int, default=CHECKPOINT_EVERY,
                        help="Steps between two saves of the checkpoint.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64, help="Hidden units.")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--step-time", type=float, default=0.0,
                        help="Wall seconds a step takes at least (a stand-in for a larger "
                        "model, to watch preemptions; default 0).")
    parser.add_argument("--eval-every", type=int, default=500,
                        help="Steps between two accuracy lines.")
    parser.add_argument("--seed", type=int, default=0)
    found = parser.parse_args(argv)
    for name in ("checkpoint_every", "batch_size", "hidden", "eval_every"):
        if getattr(found, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if found.steps is not None and found.steps < 0:
        parser.error("--steps must be at least 0")
    if not (found.learning_rate > 0 and 0 <= found.step_time < 60):
        parser.error("--learning-rate must be > 0 and --step-time from 0 to 60 s")
    return found


def digits(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training and test images (pixels scaled to [0, 1]) and labels, split at random."""
    from sklearn.datasets import load_digits  # type: ignore[import-untyped]

    data = load_digits()
    order = np.random.default_rng(seed).permutation(len(data.target))
    images, labels = data.data[order] / 16.0, data.target[order]
    return images[TEST_IMAGES:], labels[TEST_IMAGES:], images[:TEST_IMAGES], labels[:TEST_IMAGES]


class Model:
    """A multilayer perceptron: ``tanh(x W1 + b1) W2 + b2``, softmax cross-entropy."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights

    @classmethod
    def initial(cls, hidden: int, rng: np.random.Generator) -> Model:
        """Small random weights (Glorot's scale), zero biases."""
        return cls({"w1": rng.normal(0, 1 / 8, (64, hidden)), "b1": np.zeros(hidden),
                    "w2": rng.normal(0, hidden ** -0.5, (hidden, 10)), "b2": np.zeros(10)})

    def logits(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The hidden layer's activations and the output logits."""
        w = self.weights
        hidden = np.tanh(images @ w["w1"] + w["b1"])
        return hidden, hidden @ w["w2"] + w["b2"]

    def step(self, images: np.ndarray, labels: np.ndarray, learning_rate: float) -> float:
        """One SGD step on a minibatch; its mean loss before the step."""
        w = self.weights
        hidden, logits = self.logits(images)
        logits -= logits.max(axis=1, keepdims=True)
        probabilities = np.exp(logits)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        rows = np.arange(len(labels))
        loss = float(-np.log(probabilities[rows, labels]).mean())
        output_grad = probabilities
        output_grad[rows, labels] -= 1.0
        output_grad /= len(labels)
        hidden_grad = (output_grad @ w["w2"].T) * (1.0 - hidden ** 2)
        for name, grad in (("w2", hidden.T @ output_grad), ("b2", output_grad.sum(axis=0)),
                           ("w1", images.T @ hidden_grad), ("b1", hidden_grad.sum(axis=0))):
            w[name] -= learning_rate * grad
        return loss

    def accuracy(self, images: np.ndarray, labels: np.ndarray) -> float:
        """The share of ``images`` classified right."""
        return float((self.logits(images)[1].argmax(axis=1) == labels).mean())


def save(path: Path, model: Model, rng: np.random.Generator, step: int) -> None:
    """The checkpoint, written atomically: a temporary file renamed over the last."""
    buffer = io.BytesIO()
    arrays = {"step": np.asarray(step), "rng": np.asarray(json.dumps(rng.bit_generator.state)),
              **model.weights}
    np.savez(buffer, allow_pickle=False, **arrays)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(buffer.getvalue())
    os.replace(temporary, path)


def restore(path: Path, model: Model, rng: np.random.Generator) -> int:
    """The step of the checkpoint in ``path``, its weights and random state put in
    ``model`` and ``rng``; 0 if there is none."""
    if not path.exists():
        return 0
    with np.load(path) as saved:
        model.weights = {name: saved[name] for name in model.weights}
        rng.bit_generator.state = json.loads(str(saved["rng"]))
        return int(saved["step"])


def checkpoint_file(given: Path | None) -> Path:
    """--checkpoint, else beside the job's report under Slurm, else the working folder."""
    folder, slurm_id = os.environ.get(job.FOLDER_VARIABLE), os.environ.get(job.JOB_ID_VARIABLE)
    if given is not None:
        return given
    return Path(folder) / f"{slurm_id}.digits.npz" if folder and slurm_id else \
        Path("train_digits.npz")


def main(argv: list[str] | None = None) -> int:
    """Train, checkpoint, stop when asked (module docstring); the exit code."""
    options = arguments(argv)
    path = checkpoint_file(options.checkpoint)
    train_x, train_y, test_x, test_y = digits(options.seed)
    rng = np.random.default_rng(options.seed)
    model = Model.initial(options.hidden, rng)
    try:
        step = restore(path, model, rng)
        run = job.start(step)  # SIGTERM from here on sets run.must_stop
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        print(f"error: {path}: not a checkpoint of this script, or an unreadable report "
              f"({exc})", file=sys.stderr)
        return 2
    total = options.steps if options.steps is not None else int(run.work) or DEFAULT_STEPS
    if step:  # (a report ahead of the checkpoint: a SIGKILL cut the last run short)
        reported = f"; its report said {run.resumed_steps:g}" if run.path else ""
        print(f"resumed at step {step} from {path}{reported}", flush=True)
    loss = float("nan")
    while step < total:
        began = time.monotonic()
        batch = rng.integers(0, len(train_y), options.batch_size)
        loss = model.step(train_x[batch], train_y[batch], options.learning_rate)
        step += 1
        if options.step_time:
            time.sleep(max(0.0, options.step_time - (time.monotonic() - began)))
        if step % options.checkpoint_every == 0 or run.must_stop:
            save(path, model, rng, step)
        run.report(step)
        if step % options.eval_every == 0:
            print(f"step {step}: loss {loss:.3f}, test accuracy "
                  f"{100 * model.accuracy(test_x, test_y):.1f} %", flush=True)
        if run.must_stop and step < total:
            run.stopped(step)
            print(f"stopped by signal {run.signal} at step {step}; checkpoint saved",
                  flush=True)
            return run.exit_code
    save(path, model, rng, step)
    run.completed(step)
    print(f"done: {step} steps, test accuracy {100 * model.accuracy(test_x, test_y):.2f} %",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
