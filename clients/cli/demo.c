/* demo.c — the README's agent session: a sandbox for one task on a given
 * template, three actions whose variables and imports survive, one error
 * with its traceback (the context survives it), one output past the cap
 * (cut, and the agent is told), an Exec that shows the kernel the code ran
 * under (the host's for the process driver, gVisor's Sentry for gvisor),
 * and the kill in a finally-style cleanup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli/cli.h"

static const char *actions[] = {
    "import pandas as pd\n"
    "df = pd.DataFrame({'city': ['Oslo', 'Lima', 'Pune'], 'temp': [3.5, 19.0, 31.2]})\n"
    "print('loaded', len(df), 'rows')",
    "df['temp_f'] = df.temp * 9 / 5 + 32\n"
    "hottest = df.loc[df.temp.idxmax(), 'city']\n"
    "hottest",
    "print(f'{hottest} is hottest; mean {df.temp_f.mean():.1f} F')\n"
    "sorted(df.city)",
};

static void banner(const char *s)
{
    printf("\n--- %s\n", s);
    fflush(stdout);
}

int cli_demo(cli_conn *c, const char *template_name)
{
    /* one task per template: a create for the same task returns the
     * sandbox the task already has, whatever template it names */
    char task[160];
    snprintf(task, sizeof task, "demo-%s", template_name);
    Sandgate__V1__CreateSandboxRequest req;
    sandgate__v1__create_sandbox_request__init(&req);
    req.template_ = (char *)template_name;
    req.task_id = task;
    req.user_id = (char *)c->user;
    req.ttl_seconds = 300;
    Sandgate__V1__Sandbox *s;
    if (cli_unary(c, "/sandgate.v1.Sandboxes/CreateSandbox", &req.base,
                  &sandgate__v1__sandbox__descriptor, (ProtobufCMessage **)&s) != 0)
        return -1;
    char id[128];
    snprintf(id, sizeof id, "%s", s->sandbox_id);
    char isolation[32];
    snprintf(isolation, sizeof isolation, "%s", s->isolation && s->isolation[0] ? s->isolation : "process");
    sandgate__v1__sandbox__free_unpacked(s, NULL);
    printf("created sandbox %s for task %s (template %s, isolation %s)\n", id, task,
           template_name, isolation);
    int rc = 0;
    cli_run_result res;
    for (size_t i = 0; i < sizeof actions / sizeof actions[0] && rc == 0; i++) {
        char title[64];
        snprintf(title, sizeof title, "action %zu (state from earlier actions survives)", i + 1);
        banner(title);
        printf("%s\n>>>\n", actions[i]);
        rc = cli_run(c, id, NULL, actions[i], 30, 0, &res);
    }
    if (rc == 0) {
        banner("action 4: an error (the context survives it)");
        rc = cli_run(c, id, NULL, "ratio = df.temp.sum() / 0\nimport math\nmath.sqrt(-1)", 30, 0,
                     &res);
        if (rc == 0 && !res.had_error)
            rc = -1;
    }
    if (rc == 0) {
        banner("action 5: output past the cap (cut; the agent is told)");
        rc = cli_run(c, id, NULL, "for i in range(5000):\n    print('row', i, hottest)", 30, 256,
                     &res);
        if (rc == 0 && !res.truncated)
            rc = -1;
    }
    if (rc == 0) {
        banner("exec: a shell command in the same sandbox, and the kernel it runs under");
        rc = cli_exec(c, id,
                      "uname -n; id -u; ls /; echo \"kernel: $(uname -r)\"; cat /proc/version",
                      10, &res);
    }
    Sandgate__V1__KillSandboxRequest kr;
    sandgate__v1__kill_sandbox_request__init(&kr);
    kr.sandbox_id = id;
    kr.user_id = (char *)c->user;
    ProtobufCMessage *out;
    if (cli_unary(c, "/sandgate.v1.Sandboxes/KillSandbox", &kr.base,
                  &sandgate__v1__kill_sandbox_response__descriptor, &out) == 0) {
        protobuf_c_message_free_unpacked(out, NULL);
        printf("\nkilled sandbox %s\n", id);
    } else {
        rc = -1;
    }
    return rc;
}
