"""reseed.py — fresh random state in every forked sandbox and context.

Owns: re-seeding the global random generators a forked child inherited from
the zygote, so two sandboxes (or two contexts) never produce the same
"random" values. What it can't reach: the str hash seed (fixed per
interpreter at start) — hash order is not a secret, and os.urandom /
secrets / numpy's default_rng() draw fresh kernel entropy on every call.
"""

import random
import sys


def reseed():
    # random.seed() with no argument reads os.urandom.
    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        # The legacy global RandomState behind np.random.rand() etc.;
        # seed() with no argument pulls OS entropy.
        try:
            np.random.seed()
        except Exception:
            pass
    # tempfile's name generator reseeds itself when it sees a new pid.
