#!/usr/bin/python3
"""Writes the seed corpus for gateway_request_fuzz and host_request_fuzz (tests/fuzz/corpus/).

Each file: one selector byte (the message's index in the target's table),
then the message's wire bytes, encoded by hand so the seeds can hold what a
proto3 library refuses to encode (NUL, invalid UTF-8). Re-run after adding a
field; crash inputs found by a fuzz run are copied in beside these.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def ld(field, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(field << 3 | 2) + varint(len(data)) + data


def vi(field, n):
    return varint(field << 3) + varint(n)


SID = "local-0123456789abcdef0123456789abcdef"
CREATE = (ld(1, "code-interpreter") + ld(2, "alice") + ld(3, "task-1") + vi(4, 60) +
          ld(5, ld(1, "A") + ld(2, "1")) + ld(5, ld(1, "PEM") + ld(2, "-----\n\xc3\xa9\n")) +
          ld(6, ld(1, "pypi.org") + vi(2, 443)) + ld(7, "db") + ld(8, "dG9r.ZW4.1.c2ln"))
REF = ld(1, SID) + ld(2, "alice")
RUN = REF + ld(3, "default") + ld(4, "print('h\xc3\xa9')") + vi(5, 10) + vi(6, 4096)
EXEC = REF + ld(3, "ls -la") + vi(4, 5)
WRITE = REF + ld(3, "dir/a.txt") + ld(4, b"\x00\x01data") + vi(5, 0o644)
READ = REF + ld(3, "dir/a.txt")
CONTEXT = REF + ld(3, "python")

gateway = [  # index = position in gateway_request_fuzz.c's msgs[]
    (0, "create", CREATE), (0, "create_env_nul", ld(5, ld(1, "A") + ld(2, b"a\0b"))),
    (0, "create_user_utf8", ld(2, b"al\xe9")), (1, "get", REF),
    (1, "get_nul", ld(1, SID + "\0junk")), (2, "list", ld(1, "alice")),
    (3, "kill", REF), (4, "extend", REF + vi(3, 300)), (5, "context", CONTEXT),
    (6, "run", RUN), (6, "run_overlong", REF + ld(4, b"\xc0\xaf")), (7, "exec", EXEC),
    (8, "write", WRITE), (8, "write_nul_path", REF + ld(3, b"a.txt\0../../x")), (9, "read", READ),
    (10, "health", ld(1, "sandgate.v1.Sandboxes")), (10, "health_nul", ld(1, b"sandgate.v1.Sandboxes\0x")),
    (11, "reflection_list", ld(1, "localhost") + ld(7, "")),
    (11, "reflection_symbol", ld(4, "sandgate.v1.Sandboxes")),
]
OWNER = ld(1, "acme") + ld(2, "alice") + ld(3, "task-1")
LIMITS = vi(1, 512 << 20) + vi(2, 1000) + vi(3, 128) + vi(7, 16 << 20)
RULE = ld(1, "tenants.acme.network[0]") + ld(2, "*.pypi.org") + ld(4, varint(443))
SECRET = ld(1, "db") + ld(2, "DB_PASSWORD") + ld(3, b"s3cret")
HCREATE = (ld(1, CREATE) + ld(2, OWNER) + ld(3, LIMITS) + ld(4, RULE) + ld(5, SECRET) +
           ld(6, SID) + ld(7, "task\x1facme\x1falice\x1ftask-1") + vi(8, 1 << 20) + vi(9, 100))
host = [  # index = position in host_request_fuzz.c's msgs[]
    (0, "create", HCREATE), (0, "create_owner_nul", ld(1, CREATE) + ld(2, ld(2, b"a\0evil"))),
    (0, "create_env_ctrl", ld(1, ld(5, ld(1, "A") + ld(2, "\x01" * 300))) + ld(2, OWNER)),
    (1, "ref", ld(1, SID)), (2, "list", ld(1, "acme") + ld(2, "alice")),
    (3, "extend", ld(1, SID) + vi(2, 1700000000000)), (4, "context", CONTEXT),
    (5, "run", RUN), (6, "exec", EXEC), (7, "write", WRITE), (8, "read", READ),
    (9, "health", ld(1, "sandgate.v1.Host")), (10, "reflection_file", ld(3, "sandgate/v1/host.proto")),
    (10, "reflection_ext", ld(5, ld(1, "sandgate.v1.Host") + varint(2 << 3) + varint(5))),
]



def page_token(sid):
    import base64
    return "sgp1." + base64.urlsafe_b64encode(sid.encode()).decode().rstrip("=")


LABELS = ld(9, ld(1, "team") + ld(2, "red")) + ld(9, ld(1, "app.kubernetes.io/name") +
                                                  ld(2, "caf\xc3\xa9"))
api = [  # index = position in gateway_api_fuzz.c's msgs[]
    (0, "ls", REF + ld(3, "dir") + vi(4, 1) + vi(5, 500)),
    (0, "ls_max", REF + vi(5, 10001)),
    (1, "stat", REF + ld(3, "dir/a.txt")), (1, "stat_dotdot", REF + ld(3, "../../etc/passwd")),
    (2, "mkdir", REF + ld(3, "a/b/c") + vi(4, 1) + vi(5, 0o700)),
    (2, "mkdir_mode", REF + ld(3, "a") + vi(5, 0o1777)),
    (3, "rm", REF + ld(3, "a") + vi(4, 1)),
    (4, "mv", REF + ld(3, "a.txt") + ld(4, "b/a.txt") + vi(5, 1)),
    (4, "mv_nul", REF + ld(3, b"a\0b") + ld(4, "c")),
    (5, "upload", REF + ld(3, "up.bin") + vi(4, 0) + ld(5, b"\x00" * 64) + vi(6, 0o644) +
     vi(7, 64)),
    (5, "upload_resume", REF + ld(3, "up.bin") + vi(4, 1 << 40) + vi(7, (1 << 64) - 1)),
    (6, "download", REF + ld(3, "big.bin") + vi(4, 100) + vi(5, 50) + vi(6, 4096)),
    (6, "download_chunk", REF + ld(3, "big.bin") + vi(6, (4 << 20) + 1)),
    (7, "watch", REF + ld(3, "w") + vi(4, 1)),
    (8, "contexts", REF), (9, "restart", REF + ld(3, "default")),
    (10, "delete", REF + ld(3, "ctx-1")),
    (11, "list_labels", ld(1, "alice") + ld(2, ld(1, "team") + ld(2, "red")) + vi(3, 2) +
     ld(4, page_token(SID))),
    (11, "list_bad_token", ld(1, "alice") + ld(4, "sgp1.!!!")),
    (11, "list_page", ld(1, "alice") + vi(3, 1001)),
    (12, "create_labels", CREATE + LABELS),
    (12, "create_label_key", ld(1, "code-interpreter") + ld(9, ld(1, "bad key") + ld(2, "v"))),
    (13, "health", ld(1, "sandgate.v1.Sandboxes")),
    (14, "reflection", ld(4, "sandgate.v1.Sandboxes")),
]

for side, seeds in (("gateway_request_fuzz", gateway), ("host_request_fuzz", host),
                    ("gateway_api_fuzz", api)):
    d = os.path.join(HERE, "corpus", side)
    os.makedirs(d, exist_ok=True)
    for idx, name, wire in seeds:
        with open(os.path.join(d, "seed-" + name), "wb") as f:
            f.write(bytes([idx]) + wire)
