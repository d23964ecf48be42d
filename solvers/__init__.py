"""Planners (ILP/MILP formulations) and the solver-backend seam.

python-mip logs its own complaints when a native solver library fails to load (two ``logging`` lines and
a ``pip install mip[highs]`` hint on stderr, through logging's last-resort handler). Every planner reaches
python-mip through this package, and ``solvers.backend.preflight`` turns such a failure into one ``error:``
line naming the fix that works here (the lock), so python-mip's own lines are silenced before it is first
imported: a handler on its logger keeps them off stderr; ``--verbose`` users still get the traceback.
"""

import logging

logging.getLogger("mip").addHandler(logging.NullHandler())
