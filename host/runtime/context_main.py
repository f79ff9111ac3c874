"""context_main.py — a context that sandgate-init starts in a running sandbox.

Owns: the entry of every context after the default one (CTX <id>): a fresh
interpreter, exec'd by pid 1 with the context socket on fd 3 and the output
pipes on fds 1 and 2 (host/init/children.c). The default context is forked
from the zygote instead and never runs this. What a context does is
context.py's.
"""

import os
import socket
import sys

# Run as `python3 -I context_main.py`: -I leaves the script's folder off sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import context  # noqa: E402
import prctl  # noqa: E402

# exec made this process dumpable again; the zygote's forks are not.
prctl.set_dumpable(False)
if sys.argv[1:] == ["--javascript"]:   # CTX <id> javascript
    import jscontext  # noqa: E402
    jscontext.exec_node(3, 1, 2, dict(os.environ))   # never returns
context.start(socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=3),
              1, 2)
