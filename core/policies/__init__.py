"""Online scheduling policies, one module each, registered by name.

``registry.get(name)`` returns the policy class and its typed config class;
``registry.names()`` lists them. Adding a policy: one module that decorates
its :class:`~shepherd.core.policies.base.Policy` subclass with
``@register("name", ConfigClass)``, plus one import line below.
"""

from shepherd.core.policies import clockwork  # noqa: F401
from shepherd.core.policies import flex  # noqa: F401  (registers flex, flex-np)
from shepherd.core.policies import nexus  # noqa: F401
from shepherd.core.policies import registry  # noqa: F401
from shepherd.core.policies import ppipe  # noqa: F401  (PPipe data plane)
from shepherd.core.policies import reactive  # noqa: F401  (PPipe §7.4 baseline)
from shepherd.core.policies import accordion  # noqa: F401  (accordion, fastest, slo-conforming, bbs, one-stage)
from shepherd.core.policies import symphony  # noqa: F401  (registers symphony, symphony-wc)
