"""reseed.py — fresh random state in every forked sandbox and context.

Owns: re-seeding the global random generators a forked child inherited from
the zygote, so two sandboxes (or two contexts) never produce the same
"random" values. What it can't reach: the str hash secret. CPython draws
it once at start-up (_Py_HashSecret, used by every str/bytes hash and
cached in every interned string's hash), so a fork cannot be given a new
one; every sandbox of one zygote shares it, and the host bounds that by
rotating zygotes (a fresh exec draws a new one; host/drivers/process/zygote.c,
docs/security.md). os.urandom / secrets / numpy's default_rng() draw fresh
kernel entropy on every call.
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
