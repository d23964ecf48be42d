"""Online scheduling policies, one module each, registered by name.

``registry.get(name)`` returns the policy class and its typed config class;
``registry.names()`` lists them. Adding a policy: one module that decorates
its :class:`~shepherd.core.policies.base.Policy` subclass with
``@register("name", ConfigClass)``, plus its name in ``registry.BUILTIN``.
"""

from shepherd.core.policies import registry  # noqa: F401

# The built-in policies' modules are imported when a policy is first asked for (``registry.BUILTIN``,
# ``registry.get``/``names``), not here: a run imports its own policy only (issue 43).
