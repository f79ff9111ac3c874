"""tests/drivers.py — which isolation driver a suite runs against.

Suites that must hold on both drivers (issue 14: end to end, runtime
protocol, Python client, tenancy, egress, security escapes, teardown) are
registered twice in CTest: as themselves (label driver-process) and as
<name>_gvisor (label driver-gvisor) with SANDGATE_TEST_DRIVER=gvisor in
their environment. A suite's harness passes every host config it writes or
copies through host_config(): with the gvisor driver selected, each template
gets `isolation: gvisor`, so template names, the policy and the assertions
stay the same and only the driver under them changes.

    python3 tests/drivers.py FILE [TEMPLATE...]
                                      rewrites FILE in place (for shell and C
                                      harnesses), per SANDGATE_TEST_DRIVER;
                                      with TEMPLATEs, keeps only those

A harness that starts deploy/local/run.sh without a host config of its own
(run.sh's default is deploy/local/host.yaml, which ships a process and a
gvisor template) gives it local_host_config(dir) instead, so a process run
never warms gVisor sandboxes (~110 MiB and 2 s of CPU each; SANDGATE_POOL_SIZE
sizes every template's pool).
"""
import os
import re
import sys

DRIVERS = ("process", "gvisor")


def current():
    """The driver this run asks for: SANDGATE_TEST_DRIVER, default process."""
    d = os.environ.get("SANDGATE_TEST_DRIVER", "") or "process"
    if d not in DRIVERS:
        raise SystemExit("SANDGATE_TEST_DRIVER=%r: one of %s" % (d, ", ".join(DRIVERS)))
    return d


def is_gvisor():
    return current() == "gvisor"


_ITEM = re.compile(r"^(\s*)- name:\s*\S")
_ISOL = re.compile(r"^\s+isolation:\s*(\S+)")


def _templates(lines):
    """Split the lines of a host config into (head, [template items], tail):
    the items of the top-level `templates:` list, each a list of lines."""
    head, items, tail, state = [], [], [], "head"
    for line in lines:
        top = re.match(r"^\S", line)
        if state == "head":
            head.append(line)
            if top and line.startswith("templates:"):
                state = "in"
        elif state == "in":
            if top:
                state = "tail"
                tail.append(line)
            elif _ITEM.match(line):
                items.append([line])
            elif items:
                items[-1].append(line)
            else:
                head.append(line)
        else:
            tail.append(line)
    return head, items, tail


def host_config(text, driver=None):
    """text (a sandgate-host YAML config) for a run on driver (default:
    current()): a template that names no isolation gets `isolation: driver`;
    one that names an isolation is kept only when it is driver's (so
    deploy/local's code-interpreter-gvisor is not warmed by process-driver
    suites, and both templates are gVisor ones in a gvisor run)."""
    driver = driver or current()
    head, items, tail = _templates(text.splitlines(keepends=True))
    out = list(head)
    for item in items:
        named = [m.group(1) for m in map(_ISOL.match, item) if m]
        if named:
            if named[0].strip("\"'") == driver:
                out.extend(item)
            continue
        out.append(item[0])
        if driver != "process":
            out.append("%s  isolation: %s\n" % (_ITEM.match(item[0]).group(1), driver))
        out.extend(item[1:])
    return "".join(out + tail)


LOCAL_HOST_YAML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                               "deploy", "local", "host.yaml")


def only_templates(text, names):
    """text (a host config) with only the templates named in names."""
    head, items, tail = _templates(text.splitlines(keepends=True))
    keep = [it for it in items if re.match(r"^\s*- name:\s*[\"']?([^\s\"']+)", it[0]).group(1)
            in names]
    return "".join(head + [line for it in keep for line in it] + tail)


def local_host_config(directory, driver=None, name="host.yaml", only=None):
    """deploy/local/host.yaml for driver, written to directory/name; returns
    its path (for SANDGATE_HOST_CONFIG). only: keep just these templates."""
    with open(LOCAL_HOST_YAML) as f:
        text = f.read()
    text = host_config(text, driver)
    if only:
        text = only_templates(text, only)
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def rewrite(path, driver=None):
    with open(path) as f:
        text = f.read()
    new = host_config(text, driver)
    if new != text:
        with open(path, "w") as f:
            f.write(new)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    rewrite(sys.argv[1])
    if len(sys.argv) > 2:
        with open(sys.argv[1]) as f:
            text = only_templates(f.read(), sys.argv[2:])
        with open(sys.argv[1], "w") as f:
            f.write(text)
