"""tests/uid_range.py — the Python side of tests/uid_range.sh: a sandbox uid
range (uid_base 1000000 + i * 5000, i in 0..39) no other test running on this
machine holds, held by flock(2) on /tmp/sandgate-uid-ranges/<i>.lock until
the returned file is closed or this process exits. The fd is close-on-exec,
so no daemon or sandbox this process starts holds it."""
import fcntl
import os

DIR = "/tmp/sandgate-uid-ranges"
FIRST, SIZE, COUNT = 1000000, 5000, 40


def acquire():
    """(uid_base, lock file): keep the file open while the range is in use."""
    os.makedirs(DIR, exist_ok=True)
    for i in range(COUNT):
        f = open(os.path.join(DIR, "%d.lock" % i), "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        return FIRST + i * SIZE, f
    raise RuntimeError("uid_range: all %d uid ranges are in use" % COUNT)
