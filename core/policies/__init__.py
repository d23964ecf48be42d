"""Online scheduling policies, one module each, registered by name."""
