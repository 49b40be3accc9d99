"""``kleene.nn.modes.inference``: eval mode and no gradients inside, the module's own mode back after."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from kleene.nn.modes import inference


@pytest.mark.parametrize("training", [True, False])
def test_inference_runs_in_eval_mode_without_gradients_and_restores_the_mode(training: bool) -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 2)).train(training)
    x = torch.ones(5, 3)
    with inference(model):
        assert not any(module.training for module in model.modules())
        y = model(x)
        assert not y.requires_grad and torch.equal(y, model(x))  # no dropout: the same numbers twice
    assert all(module.training is training for module in model.modules())
    with pytest.raises(RuntimeError, match="inside"), inference(model):
        raise RuntimeError("inside")
    assert all(module.training is training for module in model.modules())
    assert model(x).requires_grad
