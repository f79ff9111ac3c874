"""A short agent-style session with the sandgate Python client.

    SANDGATE_ADDR=127.0.0.1:7443 SANDGATE_API_KEY=sg-demo-key-0001 \\
    SANDGATE_USER=alice python quickstart.py

(deploy/local/demo.sh runs it from a venv the package is installed in.)
"""
from sandgate import PolicyDenied, Sandbox


def main():
    with Sandbox.create(template="code-interpreter", task_id="quickstart", ttl_seconds=300) as sb:
        print("sandbox", sb.sandbox_id)
        sb.run_code("import statistics\nprices = [3.5, 4.25, 2.0, 5.75]")
        chunks = []
        ex = sb.run_code("print('mean', statistics.mean(prices))\nmax(prices)",
                         on_stdout=chunks.append)
        print("  stdout: %r (streamed in %d chunks), result: %s" % (ex.logs.stdout, len(chunks),
                                                                   ex.text))
        ex = sb.run_code("prices[10]")
        print("  error:", ex.error.name, "-", ex.error.value, "(context survives)")
        sb.files.write("report.txt", "prices: %d\n" % 4)
        res = sb.commands.run("wc -c report.txt && python3 -c 'print(2**10)'", timeout=10)
        print("  shell: exit %d, %r" % (res.exit_code, res.stdout))
        try:
            Sandbox.create(task_id="quickstart-net", egress=[("example.com", 443)])
        except PolicyDenied as e:
            print("  egress denied by rule %s" % e.rule)
    print("sandbox killed")


if __name__ == "__main__":
    main()
