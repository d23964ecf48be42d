"""Measured profiles: real PyTorch models timed on this machine (``shepherd profile --measure``).

``torch`` is an optional extra; nothing here imports it at module import
time, so the CLI can say how to install it (:func:`need_torch`).
"""

from __future__ import annotations

from shepherd.core.errors import UserError

#: the one spelling of the PyTorch extra's install command (the distribution is ``shepherd-serving``; the package
#: index's ``shepherd`` is an unrelated project): code, --help, README and tests use it (tests/test_install_hint.py)
TORCH_PIP = "pip install 'shepherd-serving[torch]'"
#: the same for rich-formatted --help text, where ``[torch]`` would be read as a markup tag and vanish
TORCH_PIP_RICH = TORCH_PIP.replace("[", "\\[")
INSTALL_HINT = f"profile --measure needs PyTorch: {TORCH_PIP} (CPU build: torch>=2.3,<2.15)"


def need_torch():
    """Import torch or raise the one-line install hint."""
    try:
        import torch
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return torch
