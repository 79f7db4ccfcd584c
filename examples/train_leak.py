"""A training loop that gains memory every step: the model keeps each step's feature map in
a list "for later", so the list outlives the step. Its scratch activations are freed.

    gpumem leaks -c python3 examples/train_leak.py [STEPS]

gpumem names the line that makes the kept feature map and how much it grows per step."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import fakegpu  # noqa: E402  (a framework, installed as a package would be)

FEATURE_MAP = 4 * fakegpu.MiB


class Model:
    def __init__(self):
        self.weights = fakegpu.empty(32 * fakegpu.MiB)
        self.history = []       # grows by one feature map a step: the leak

    def forward(self, batch):
        hidden = fakegpu.empty(16 * fakegpu.MiB)        # freed at the end of the step
        features = fakegpu.empty(FEATURE_MAP)
        self.history.append(features)
        return hidden


def train(steps):
    model = Model()
    for step in range(steps):
        activations = model.forward(step)
        gradients = fakegpu.empty(16 * fakegpu.MiB)
        del activations, gradients
        time.sleep(0.02)
    print(f"trained {steps} steps; the model keeps {len(model.history)} feature maps",
          file=sys.stderr)
    return model


if __name__ == "__main__":
    model = train(int(sys.argv[1]) if len(sys.argv) > 1 else 150)
