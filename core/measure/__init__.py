"""Measured profiles: real PyTorch models timed on this machine (``shepherd profile --measure``).

``torch`` is an optional extra; nothing here imports it at module import
time, so the CLI can say how to install it (:func:`need_torch`).
"""

from __future__ import annotations

from shepherd.core.errors import UserError

INSTALL_HINT = "profile --measure needs PyTorch: pip install 'shepherd[torch]' (CPU build: torch>=2.3,<2.15)"


def need_torch():
    """Import torch or raise the one-line install hint."""
    try:
        import torch
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return torch
