"""VGG16, ResNet18/34/50/152 and a tiny CNN defined in the project (random weights; no torchvision, no download).

Latency does not depend on weight values, so random initialisation is
enough. Each model is an ``nn.Sequential`` of *layers* in execution order —
the units Accordion assigns to pipeline stages (§3.1): VGG16's 13
convolutions (+ReLU, +pooling where the network pools) and 3 fully
connected layers; a ResNet's stem, one unit per bottleneck block and the
classifier. Any ``package.module:factory`` returning an ``nn.Module`` is
accepted too (:func:`build`); its ``input_shape`` attribute (without the
batch dimension) sets the input, default 3×224×224. A built-in name may end
in ``@R`` to run it on R×R inputs (``ResNet18@112``: the small CPU models of
the live validation keep batches in the tens of milliseconds on one core);
``TinyCNN`` (three convolutions on 3×32×32) is for mechanics tests.
"""

from __future__ import annotations

import importlib

from shepherd.core.errors import UserError
from shepherd.core.measure import need_torch

DEFAULT_INPUT = (3, 224, 224)
BUILTIN = ("VGG16", "ResNet18", "ResNet34", "ResNet50", "ResNet152", "TinyCNN")


def _vgg16(nn):
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    layers, c = [], 3
    for i, v in enumerate(cfg):
        if v == "M":
            layers[-1].append(nn.MaxPool2d(2))
            continue
        layers.append([nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)])
        c = v
    units = [nn.Sequential(*u) for u in layers]
    units[-1].append(nn.Flatten())
    units += [nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=True)),
              nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(inplace=True)), nn.Linear(4096, 1000)]
    return nn.Sequential(*units)


def _resnet(nn, torch, blocks, bottleneck=True):
    """ResNet (He et al. 2016, Table 1): a 7×7 stem, four stages of residual blocks, pooling and a classifier;
    ``bottleneck``: 1×1-3×3-1×1 blocks of 4× expansion (ResNet50/152), else two 3×3 convolutions (ResNet18/34)."""
    expansion = 4 if bottleneck else 1

    class Block(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * expansion
            if bottleneck:
                convs = [nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                         nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                         nn.ReLU(inplace=True), nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            else:
                convs = [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)]
            self.body = nn.Sequential(*convs)
            self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                          if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            return torch.relu(self.body(x) + self.short(x))

    units = [nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                           nn.MaxPool2d(3, 2, 1))]
    cin = 64
    for stage, n in enumerate(blocks):
        width = 64 * 2 ** stage
        for i in range(n):
            units.append(Block(cin, width, 2 if i == 0 and stage > 0 else 1))
            cin = width * expansion
    units.append(nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)))
    return nn.Sequential(*units)


def _tiny(nn):
    return nn.Sequential(nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU()),
                         nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU()),
                         nn.Sequential(nn.Conv2d(32, 32, 3, 2, 1), nn.ReLU()),
                         nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)))


def _split_resolution(name: str) -> tuple[str, int | None]:
    """``ResNet18@112`` → (``ResNet18``, 112); a name without ``@`` → (name, None)."""
    if "@" not in name or ":" in name:
        return name, None
    base, _, res = name.partition("@")
    if not res.isdigit() or not 8 <= int(res) <= 1024:
        raise UserError(f"model '{name}': the input resolution after '@' must be an integer in 8…1024")
    return base, int(res)


def build(name: str):
    """(module in eval mode, input shape without batch) for a built-in name or ``package.module:factory``."""
    torch = need_torch()
    nn = torch.nn
    name, res = _split_resolution(name)
    if res is not None and name not in BUILTIN:
        raise UserError(f"no built-in model '{name}' (built in: {', '.join(BUILTIN)})")
    shape = None
    if name == "VGG16":
        model = _vgg16(nn)
    elif name == "ResNet18":
        model = _resnet(nn, torch, (2, 2, 2, 2), bottleneck=False)
    elif name == "ResNet34":
        model = _resnet(nn, torch, (3, 4, 6, 3), bottleneck=False)
    elif name == "TinyCNN":
        model, shape = _tiny(nn), (3, 32, 32)
    elif name == "ResNet50":
        model = _resnet(nn, torch, (3, 4, 6, 3))
    elif name == "ResNet152":
        model = _resnet(nn, torch, (3, 8, 36, 3))
    elif ":" in name:
        mod, _, fn = name.partition(":")
        try:
            model = getattr(importlib.import_module(mod), fn)()
        except (ImportError, AttributeError) as exc:
            raise UserError(f"cannot load model factory '{name}': {exc}") from None
        if not isinstance(model, nn.Module):
            raise UserError(f"model factory '{name}' returned {type(model).__name__}, not an nn.Module")
    else:
        raise UserError(f"no model '{name}' to measure (built in: {', '.join(BUILTIN)}; "
                        "or give package.module:factory)")
    if name == "VGG16" and res is not None and res != 224:
        raise UserError("VGG16's classifier is fixed to 224×224 inputs (no '@' resolution)")
    shape = shape or tuple(getattr(model, "input_shape", DEFAULT_INPUT))
    if res is not None:
        shape = (shape[0], res, res)
    return model.eval(), shape


def layers(model) -> list[tuple[str, object]]:
    """The model's layers in execution order: the children of an ``nn.Sequential``."""
    torch = need_torch()
    if not isinstance(model, torch.nn.Sequential):
        raise UserError("--per-layer needs a model that is an nn.Sequential of its layers")
    return [(n, m) for n, m in model.named_children()]
