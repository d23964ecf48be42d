"""The measured-profile zoo's small CPU models (issue 34): ResNet18/34, TinyCNN and the ``@R`` input resolution."""

from __future__ import annotations

import pytest

from shepherd.core.errors import UserError

torch = pytest.importorskip("torch")

from shepherd.core.measure import zoo  # noqa: E402


@pytest.mark.parametrize("name, shape", [("ResNet18@64", (3, 64, 64)), ("ResNet34@32", (3, 32, 32)),
                                         ("TinyCNN", (3, 32, 32)), ("ResNet18", (3, 224, 224))])
def test_models_run_on_their_input(name, shape):
    model, got = zoo.build(name)
    assert got == shape
    with torch.inference_mode():
        y = model(torch.randn((2, *shape)))
    assert y.shape[0] == 2
    assert len(zoo.layers(model)) >= 4  # a Sequential of layers: the live worker's preemption points


def test_resnet18_has_eight_basic_blocks():
    model, _ = zoo.build("ResNet18@64")
    assert len(zoo.layers(model)) == 1 + 8 + 1  # stem, 2·4 blocks, classifier (He et al. Table 1)


@pytest.mark.parametrize("name", ["ResNet18@", "ResNet18@x", "ResNet18@4", "NoNet@64", "VGG16@64"])
def test_bad_names_are_user_errors(name):
    with pytest.raises(UserError):
        zoo.build(name)
