/* load.c — bench_load: a closed-loop gRPC load generator on the C-core
 * completion-queue API (issue 7). Each client thread owns one completion
 * queue and a fixed number of call slots; a slot re-issues its call the
 * moment the previous one finishes, so the number of calls in flight is
 * exactly the concurrency. No blocking helpers on the hot path.
 *
 *   bench_load run   --addr HOST:PORT --api gateway|host --call get|run
 *                    [--key KEY] [--user U] (--id ID | --ids FILE)
 *                    [-c CONC] [--secs S --warmup W | --count N]
 *                    [--threads T] [--conns K] [--code CODE]
 *                    [--cpu NAME=PID[+PID...][,NAME=...]] [--tag TEXT]
 *   bench_load setup --addr HOST:PORT --key KEY [--user U] [--template T]
 *                    -n N --out FILE
 *                    (N sandboxes through the gateway; their ids, one a line)
 *   bench_load teardown --addr HOST:PORT --key KEY [--user U] --ids FILE
 *
 * `run` prints one line of key=value pairs (RESULT ...) that bench/run.sh
 * parses: calls, errors, secs, rate (calls/s), p50_us, p90_us, p99_us,
 * max_us, per --cpu group cpu_NAME_us (CPU time of those processes per
 * call over the measured window, from /proc/PID/stat utime+stime), and
 * cpu_client_us, the same for this load generator itself.
 *
 * Calls: `get` is GetSandbox (gateway: sandgate.v1.Sandboxes with the
 * bearer key; host: sandgate.v1.Host with a HostSandboxRef); `run` is
 * RunCode (same RunCodeRequest on both), a server stream: a call counts as
 * an error unless its status is OK, an End event arrived and no Error event.
 * Sandboxes from --ids are used round-robin. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>

#include "rpc/rpc.h"
#include "sandgate/v1/host.pb-c.h"
#include "sandgate/v1/sandgate.pb-c.h"

/* RunCodeEvent oneof tags on the wire: field number << 3 | length-delimited. */
#define TAG_ERROR ((4 << 3) | 2)
#define TAG_END ((5 << 3) | 2)

typedef struct opts {
    const char *addr, *api, *call, *key, *user, *id, *ids_file, *code, *cpu, *tag, *out, *template_;
    int conc, threads, conns, count, n;
    double secs, warmup, timeout;
} opts;

static opts O = {.api = "gateway", .call = "get", .user = "bench", .code = "x=1+1",
                 .template_ = "code-interpreter",
                 .conc = 1, .threads = 1, .conns = 1, .secs = 3, .warmup = 1, .timeout = 30};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *fmt, const char *a)
{
    fprintf(stderr, "bench_load: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n");
    exit(2);
}

/* ---- sandbox ids ---- */

static char **ids;
static int n_ids;

static void load_ids(void)
{
    if (O.id) {
        ids = malloc(sizeof *ids);
        ids[0] = strdup(O.id);
        n_ids = 1;
        return;
    }
    if (!O.ids_file)
        die("%s", "--id or --ids is required");
    FILE *f = fopen(O.ids_file, "r");
    if (!f)
        die("cannot open %s", O.ids_file);
    char line[256];
    int cap = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0])
            continue;
        if (n_ids == cap) {
            cap = cap ? cap * 2 : 64;
            ids = realloc(ids, (size_t)cap * sizeof *ids);
        }
        ids[n_ids++] = strdup(line);
    }
    fclose(f);
    if (!n_ids)
        die("no ids in %s", O.ids_file);
}

/* Requests are packed once per sandbox and reused (a fresh byte buffer per
 * call, sharing the slice). */
static grpc_slice *reqs;
static const char *method;

static grpc_slice pack_slice(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    grpc_slice s = grpc_slice_malloc(n ? n : 1);
    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    return grpc_slice_sub(s, 0, n);
}

static void build_requests(void)
{
    int host = strcmp(O.api, "host") == 0;
    int run = strcmp(O.call, "run") == 0;
    if (!host && strcmp(O.api, "gateway") != 0)
        die("--api %s: gateway or host", O.api);
    if (!run && strcmp(O.call, "get") != 0)
        die("--call %s: get or run", O.call);
    if (run)
        method = host ? "/sandgate.v1.Host/RunCode" : "/sandgate.v1.Sandboxes/RunCode";
    else
        method = host ? "/sandgate.v1.Host/GetSandbox" : "/sandgate.v1.Sandboxes/GetSandbox";
    reqs = calloc((size_t)n_ids, sizeof *reqs);
    for (int i = 0; i < n_ids; i++) {
        if (run) {
            Sandgate__V1__RunCodeRequest r = SANDGATE__V1__RUN_CODE_REQUEST__INIT;
            r.sandbox_id = ids[i];
            r.user_id = (char *)O.user;
            r.code = (char *)O.code;
            r.timeout_seconds = 30;
            reqs[i] = pack_slice(&r.base);
        } else if (host) {
            Sandgate__V1__HostSandboxRef r = SANDGATE__V1__HOST_SANDBOX_REF__INIT;
            r.sandbox_id = ids[i];
            reqs[i] = pack_slice(&r.base);
        } else {
            Sandgate__V1__GetSandboxRequest r = SANDGATE__V1__GET_SANDBOX_REQUEST__INIT;
            r.sandbox_id = ids[i];
            r.user_id = (char *)O.user;
            reqs[i] = pack_slice(&r.base);
        }
    }
}

/* ---- CPU accounting from /proc ---- */

typedef struct cpu_group {
    char name[32];
    int pids[64];
    int n;
    double t0, t1;   /* seconds of CPU */
} cpu_group;

static cpu_group groups[8];
static int n_groups;

static void parse_cpu(void)
{
    /* Always measured: the client's own CPU is part of what each path
     * costs the machine, and a proxy's client leg costs about as much. */
    snprintf(groups[0].name, sizeof groups[0].name, "client");
    groups[0].pids[0] = (int)getpid();
    groups[0].n = 1;
    n_groups = 1;
    if (!O.cpu || !O.cpu[0])
        return;
    char *copy = strdup(O.cpu), *save = NULL;
    for (char *g = strtok_r(copy, ",", &save); g && n_groups < 8; g = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(g, '=');
        if (!eq)
            die("--cpu group %s: NAME=PID[+PID]", g);
        *eq = 0;
        cpu_group *cg = &groups[n_groups++];
        snprintf(cg->name, sizeof cg->name, "%s", g);
        char *s2 = NULL;
        for (char *p = strtok_r(eq + 1, "+", &s2); p && cg->n < 64; p = strtok_r(NULL, "+", &s2))
            cg->pids[cg->n++] = atoi(p);
    }
    free(copy);
}

/* utime + stime of a process (all its threads), seconds; 0 if gone. */
static double proc_cpu(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');   /* comm may contain spaces */
    if (!p)
        return 0;
    unsigned long long ut = 0, st = 0;
    /* After ") ": state(3) ... utime is field 14, stime 15. */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void sample_cpu(int end)
{
    for (int g = 0; g < n_groups; g++) {
        double t = 0;
        for (int i = 0; i < groups[g].n; i++)
            t += proc_cpu(groups[g].pids[i]);
        if (end)
            groups[g].t1 = t;
        else
            groups[g].t0 = t;
    }
}

/* ---- the engine ---- */

static grpc_channel **chans;
static grpc_metadata auth_md[1];
static size_t n_auth_md;
static char bearer[512];

static atomic_int measuring, stopping;
static atomic_long issued;   /* --count mode: calls started so far */

typedef struct worker worker;

typedef struct slot_tag {
    struct slot *s;
    int kind;   /* 0 unary / send, 1 recv message, 2 status */
} slot_tag;

typedef struct slot {
    worker *w;
    int index;
    grpc_call *call;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array init_md, trailing;
    grpc_status_code code;
    grpc_slice details;
    int pending, saw_end, saw_error, counted;
    double t0;
    slot_tag tags[3];
} slot;

struct worker {
    int id;
    grpc_completion_queue *cq;
    slot *slots;
    int n_slots, live;
    unsigned next_id;
    double *lat;   /* microseconds */
    size_t n_lat, cap_lat;
    long errors, calls;
    long codes[20];
    char first_err[256];
    pthread_t thread;
};

static int streaming;

static int take_ticket(void)
{
    if (atomic_load(&stopping))
        return 0;
    if (O.count > 0)
        return atomic_fetch_add(&issued, 1) < O.count;
    return 1;
}

static void start_call(slot *s)
{
    worker *w = s->w;
    int idx = (int)(w->next_id++ % (unsigned)n_ids);
    idx = (idx + w->id * 7919 + s->index) % n_ids;
    grpc_channel *ch = chans[(w->id * w->n_slots + s->index) % O.conns];
    gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                   gpr_time_from_millis((int64_t)(O.timeout * 1000), GPR_TIMESPAN));
    s->call = grpc_channel_create_call(ch, NULL, 0, w->cq, grpc_slice_from_static_string(method),
                                       NULL, dl, NULL);
    grpc_slice sl = grpc_slice_ref(reqs[idx]);
    s->send = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    s->recv = NULL;
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trailing);
    s->details = grpc_empty_slice();
    s->saw_end = s->saw_error = 0;
    s->counted = atomic_load(&measuring) && !atomic_load(&stopping);
    s->t0 = now_s();

    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = n_auth_md;
    ops[0].data.send_initial_metadata.metadata = auth_md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
    grpc_op *st;
    if (!streaming) {
        ops[4].op = GRPC_OP_RECV_MESSAGE;
        ops[4].data.recv_message.recv_message = &s->recv;
        st = &ops[5];
    } else {
        st = &ops[4];
    }
    st->op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    st->data.recv_status_on_client.trailing_metadata = &s->trailing;
    st->data.recv_status_on_client.status = &s->code;
    st->data.recv_status_on_client.status_details = &s->details;
    grpc_call_error e;
    if (!streaming) {
        s->pending = 1;
        e = grpc_call_start_batch(s->call, ops, 6, &s->tags[0], NULL);
    } else {
        /* Send + status in one batch; messages read one at a time. */
        s->pending = 2;
        e = grpc_call_start_batch(s->call, ops, 5, &s->tags[2], NULL);
        if (e == GRPC_CALL_OK) {
            grpc_op rm;
            memset(&rm, 0, sizeof rm);
            rm.op = GRPC_OP_RECV_MESSAGE;
            rm.data.recv_message.recv_message = &s->recv;
            e = grpc_call_start_batch(s->call, &rm, 1, &s->tags[1], NULL);
        }
    }
    if (e != GRPC_CALL_OK) {
        fprintf(stderr, "bench_load: start_batch: %d\n", (int)e);
        exit(1);
    }
    w->live++;
}

/* First byte of a message: the RunCodeEvent oneof's tag. */
static int first_byte(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader rd;
    if (!grpc_byte_buffer_reader_init(&rd, bb))
        return -1;
    grpc_slice sl;
    int b = -1;
    while (b < 0 && grpc_byte_buffer_reader_next(&rd, &sl)) {
        if (GRPC_SLICE_LENGTH(sl))
            b = GRPC_SLICE_START_PTR(sl)[0];
        grpc_slice_unref(sl);
    }
    grpc_byte_buffer_reader_destroy(&rd);
    return b;
}

static void record(worker *w, slot *s)
{
    double t1 = now_s();
    int ok = s->code == GRPC_STATUS_OK && (!streaming || (s->saw_end && !s->saw_error));
    if (!ok && !w->first_err[0]) {
        size_t n = GRPC_SLICE_LENGTH(s->details);
        snprintf(w->first_err, sizeof w->first_err, "%s%s%.*s%s", rpc_status_name(s->code),
                 n ? ": " : "", (int)(n > 180 ? 180 : n), (const char *)GRPC_SLICE_START_PTR(s->details),
                 s->code == GRPC_STATUS_OK ? (s->saw_error ? " (Error event)" : " (no End event)") : "");
    }
    /* A call counts if it started inside the window and ended before the
     * window closed (count mode: every call). */
    if (s->counted && (O.count > 0 || !atomic_load(&stopping))) {
        w->calls++;
        if (!ok) {
            w->errors++;
            if ((int)s->code >= 0 && s->code < 20)
                w->codes[s->code]++;
        }
        if (w->n_lat == w->cap_lat) {
            w->cap_lat = w->cap_lat ? w->cap_lat * 2 : 65536;
            w->lat = realloc(w->lat, w->cap_lat * sizeof *w->lat);
        }
        w->lat[w->n_lat++] = (t1 - s->t0) * 1e6;
    }
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trailing);
    grpc_slice_unref(s->details);
    grpc_byte_buffer_destroy(s->send);
    s->send = NULL;
    grpc_call_unref(s->call);
    s->call = NULL;
    w->live--;
}

static void on_event(worker *w, slot_tag *t, int success)
{
    slot *s = t->s;
    if (t->kind == 1) {   /* a streamed message (or end of stream) */
        if (success && s->recv) {
            int b = first_byte(s->recv);
            if (b == TAG_END)
                s->saw_end = 1;
            else if (b == TAG_ERROR)
                s->saw_error = 1;
            grpc_byte_buffer_destroy(s->recv);
            s->recv = NULL;
            grpc_op rm;
            memset(&rm, 0, sizeof rm);
            rm.op = GRPC_OP_RECV_MESSAGE;
            rm.data.recv_message.recv_message = &s->recv;
            if (grpc_call_start_batch(s->call, &rm, 1, &s->tags[1], NULL) == GRPC_CALL_OK)
                return;
        }
        if (--s->pending > 0)
            return;
    } else if (t->kind == 0) {   /* unary: everything in one batch */
        if (s->recv) {
            grpc_byte_buffer_destroy(s->recv);
            s->recv = NULL;
        } else if (s->code == GRPC_STATUS_OK) {
            s->code = GRPC_STATUS_INTERNAL;   /* OK without a message */
        }
        s->pending = 0;
    } else {   /* streaming: status */
        if (--s->pending > 0)
            return;
    }
    record(w, s);
    if (take_ticket())
        start_call(s);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < w->n_slots; i++)
        if (take_ticket())
            start_call(&w->slots[i]);
    while (w->live > 0) {
        grpc_event ev = grpc_completion_queue_next(
            w->cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(200, GPR_TIMESPAN)),
            NULL);
        if (ev.type == GRPC_OP_COMPLETE)
            on_event(w, ev.tag, ev.success);
    }
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t k = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return v[k - 1];
}

static grpc_channel *make_channel(int i)
{
    /* A private subchannel pool per channel: one TCP connection each. */
    grpc_arg args[] = {
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, .value.integer = RPC_MAX_MESSAGE},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_RETRIES, .value.integer = 0},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, .value.integer = 1},
        {.type = GRPC_ARG_INTEGER, .key = "bench.channel", .value.integer = i},
    };
    grpc_channel_args cargs = {.num_args = 4, .args = args};
    grpc_channel_credentials *c = grpc_insecure_credentials_create();
    char target[300];
    snprintf(target, sizeof target, "%s%s", strncmp(O.addr, "ipv4:", 5) ? "ipv4:" : "", O.addr);
    grpc_channel *ch = grpc_channel_create(target, c, &cargs);
    grpc_channel_credentials_release(c);
    return ch;
}

static int cmd_run(void)
{
    load_ids();
    build_requests();
    parse_cpu();
    streaming = strcmp(O.call, "run") == 0;
    if (strcmp(O.api, "gateway") == 0) {
        if (!O.key)
            die("%s", "--key is required with --api gateway");
        snprintf(bearer, sizeof bearer, "Bearer %s", O.key);
        auth_md[0].key = grpc_slice_from_static_string("authorization");
        auth_md[0].value = grpc_slice_from_static_string(bearer);
        n_auth_md = 1;
    }
    if (O.threads < 1)
        O.threads = 1;
    if (O.conns < 1)
        O.conns = 1;
    if (O.conc < O.threads)
        O.threads = O.conc;
    chans = calloc((size_t)O.conns, sizeof *chans);
    for (int i = 0; i < O.conns; i++) {
        chans[i] = make_channel(i);
        /* Connect before the clock starts. */
        grpc_connectivity_state stt = grpc_channel_check_connectivity_state(chans[i], 1);
        double t_end = now_s() + 10;
        grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
        while (stt != GRPC_CHANNEL_READY && now_s() < t_end) {
            grpc_channel_watch_connectivity_state(
                chans[i], stt, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(500, GPR_TIMESPAN)),
                cq, NULL);
            grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
            stt = grpc_channel_check_connectivity_state(chans[i], 1);
        }
        grpc_completion_queue_shutdown(cq);
        while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(cq);
        if (stt != GRPC_CHANNEL_READY) {
            fprintf(stderr, "bench_load: cannot connect to %s\n", O.addr);
            return 1;
        }
    }

    worker *ws = calloc((size_t)O.threads, sizeof *ws);
    for (int i = 0; i < O.threads; i++) {
        worker *w = &ws[i];
        w->id = i;
        w->cq = grpc_completion_queue_create_for_next(NULL);
        w->n_slots = O.conc / O.threads + (i < O.conc % O.threads);
        w->slots = calloc((size_t)w->n_slots, sizeof *w->slots);
        for (int k = 0; k < w->n_slots; k++) {
            slot *s = &w->slots[k];
            s->w = w;
            s->index = k;
            for (int j = 0; j < 3; j++)
                s->tags[j] = (slot_tag){.s = s, .kind = j};
        }
    }
    double t_start = now_s(), t_end;
    if (O.count > 0) {
        atomic_store(&measuring, 1);
        sample_cpu(0);
        t_start = now_s();
    } else {
        atomic_store(&measuring, O.warmup <= 0);
    }
    for (int i = 0; i < O.threads; i++)
        pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
    if (O.count <= 0) {
        if (O.warmup > 0) {
            usleep((useconds_t)(O.warmup * 1e6));
            atomic_store(&measuring, 1);
        }
        sample_cpu(0);
        t_start = now_s();
        usleep((useconds_t)(O.secs * 1e6));
        sample_cpu(1);
        t_end = now_s();
        atomic_store(&stopping, 1);
        for (int i = 0; i < O.threads; i++)
            pthread_join(ws[i].thread, NULL);
    } else {
        for (int i = 0; i < O.threads; i++)
            pthread_join(ws[i].thread, NULL);
        sample_cpu(1);
        t_end = now_s();
    }

    size_t n = 0;
    long errors = 0, calls = 0, codes[20] = {0};
    for (int i = 0; i < O.threads; i++)
        n += ws[i].n_lat;
    double *all = malloc((n ? n : 1) * sizeof *all);
    n = 0;
    const char *first_err = "";
    for (int i = 0; i < O.threads; i++) {
        memcpy(all + n, ws[i].lat, ws[i].n_lat * sizeof *all);
        n += ws[i].n_lat;
        errors += ws[i].errors;
        calls += ws[i].calls;
        for (int c = 0; c < 20; c++)
            codes[c] += ws[i].codes[c];
        if (!first_err[0] && ws[i].first_err[0])
            first_err = ws[i].first_err;
    }
    qsort(all, n, sizeof *all, cmp_d);
    double secs = t_end - t_start;
    printf("RESULT api=%s call=%s conc=%d conns=%d threads=%d calls=%ld errors=%ld secs=%.3f "
           "rate=%.0f p50_us=%.1f p90_us=%.1f p99_us=%.1f max_us=%.1f",
           O.api, O.call, O.conc, O.conns, O.threads, calls, errors, secs,
           secs > 0 ? (double)calls / secs : 0, pct(all, n, 50), pct(all, n, 90), pct(all, n, 99),
           n ? all[n - 1] : 0);
    for (int g = 0; g < n_groups; g++)
        printf(" cpu_%s_us=%.1f", groups[g].name,
               calls ? (groups[g].t1 - groups[g].t0) * 1e6 / (double)calls : 0);
    if (O.tag)
        printf(" tag=%s", O.tag);
    printf("\n");
    if (errors) {
        fprintf(stderr, "bench_load: %ld of %ld calls failed; first: %s; by code:", errors, calls, first_err);
        for (int c = 0; c < 20; c++)
            if (codes[c])
                fprintf(stderr, " %s=%ld", rpc_status_name((grpc_status_code)c), codes[c]);
        fprintf(stderr, "\n");
    }
    fflush(stdout);
    for (int i = 0; i < O.threads; i++) {
        grpc_completion_queue_shutdown(ws[i].cq);
        while (grpc_completion_queue_next(ws[i].cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(ws[i].cq);
        free(ws[i].slots);
        free(ws[i].lat);
    }
    free(ws);
    free(all);
    for (int i = 0; i < O.conns; i++)
        grpc_channel_destroy(chans[i]);
    for (int i = 0; i < n_ids; i++)
        grpc_slice_unref(reqs[i]);
    return 0;
}

/* ---- setup / teardown through the gateway (blocking calls) ---- */

static grpc_channel *blocking_channel(void)
{
    char target[300];
    snprintf(target, sizeof target, "%s%s", strncmp(O.addr, "ipv4:", 5) ? "ipv4:" : "", O.addr);
    return rpc_channel_create(target, NULL);
}

static int cmd_setup(void)
{
    if (!O.key || !O.out || O.n <= 0)
        die("%s", "setup needs --key, -n and --out");
    snprintf(bearer, sizeof bearer, "Bearer %s", O.key);
    grpc_metadata md = {.key = grpc_slice_from_static_string("authorization"),
                        .value = grpc_slice_from_static_string(bearer)};
    grpc_channel *ch = blocking_channel();
    FILE *f = fopen(O.out, "w");
    if (!f)
        die("cannot write %s", O.out);
    int made = 0, failed = 0;
    char task[64];
    double t0 = now_s();
    for (int i = 0; i < O.n; i++) {
        Sandgate__V1__CreateSandboxRequest r = SANDGATE__V1__CREATE_SANDBOX_REQUEST__INIT;
        snprintf(task, sizeof task, "bench-%d-%d", (int)getpid(), i);
        r.template_ = (char *)O.template_;
        r.user_id = (char *)O.user;
        r.task_id = task;
        r.ttl_seconds = 3600;
        uint8_t *resp;
        size_t len;
        rpc_status st;
        if (rpc_blocking_unary(ch, "/sandgate.v1.Sandboxes/CreateSandbox", &md, 1, 60, &r.base, &resp,
                               &len, &st) != 0 || st.code != GRPC_STATUS_OK) {
            if (failed++ < 3)
                fprintf(stderr, "bench_load: create %d: %s: %s\n", i, rpc_status_name(st.code), st.details);
            if (failed >= 10)
                break;   /* the host is full (memory, pids): stop at what fits */
            continue;
        }
        Sandgate__V1__Sandbox *s = (Sandgate__V1__Sandbox *)rpc_unpack(&sandgate__v1__sandbox__descriptor,
                                                                        resp, len, NULL);
        free(resp);
        if (s) {
            fprintf(f, "%s\n", s->sandbox_id);
            made++;
            protobuf_c_message_free_unpacked(&s->base, NULL);
        }
    }
    fclose(f);
    printf("RESULT setup made=%d failed=%d secs=%.2f\n", made, failed, now_s() - t0);
    grpc_channel_destroy(ch);
    return made > 0 ? 0 : 1;
}

static int cmd_teardown(void)
{
    if (!O.key)
        die("%s", "teardown needs --key");
    load_ids();
    snprintf(bearer, sizeof bearer, "Bearer %s", O.key);
    grpc_metadata md = {.key = grpc_slice_from_static_string("authorization"),
                        .value = grpc_slice_from_static_string(bearer)};
    grpc_channel *ch = blocking_channel();
    int failed = 0;
    for (int i = 0; i < n_ids; i++) {
        Sandgate__V1__KillSandboxRequest r = SANDGATE__V1__KILL_SANDBOX_REQUEST__INIT;
        r.sandbox_id = ids[i];
        r.user_id = (char *)O.user;
        uint8_t *resp;
        size_t len;
        rpc_status st;
        if (rpc_blocking_unary(ch, "/sandgate.v1.Sandboxes/KillSandbox", &md, 1, 30, &r.base, &resp, &len,
                               &st) != 0 || st.code != GRPC_STATUS_OK)
            failed++;
        free(resp);
    }
    printf("RESULT teardown killed=%d failed=%d\n", n_ids - failed, failed);
    grpc_channel_destroy(ch);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_load run --addr H:P --api gateway|host --call get|run [--key K] [--user U]\n"
            "                  (--id ID | --ids FILE) [-c N] [--secs S] [--warmup S] [--count N]\n"
            "                  [--threads T] [--conns K] [--code C] [--cpu NAME=PID+PID,...] [--tag T]\n"
            "       bench_load setup --addr H:P --key K [--user U] [--template T] -n N --out FILE\n"
            "       bench_load teardown --addr H:P --key K [--user U] --ids FILE\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    const char *cmd = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--addr")) O.addr = v;
        else if (!strcmp(a, "--api")) O.api = v;
        else if (!strcmp(a, "--call")) O.call = v;
        else if (!strcmp(a, "--key")) O.key = v;
        else if (!strcmp(a, "--user")) O.user = v;
        else if (!strcmp(a, "--id")) O.id = v;
        else if (!strcmp(a, "--ids")) O.ids_file = v;
        else if (!strcmp(a, "--code")) O.code = v;
        else if (!strcmp(a, "--cpu")) O.cpu = v;
        else if (!strcmp(a, "--tag")) O.tag = v;
        else if (!strcmp(a, "--out")) O.out = v;
        else if (!strcmp(a, "--template")) O.template_ = v;
        else if (!strcmp(a, "-c")) O.conc = atoi(v);
        else if (!strcmp(a, "-n")) O.n = atoi(v);
        else if (!strcmp(a, "--threads")) O.threads = atoi(v);
        else if (!strcmp(a, "--conns")) O.conns = atoi(v);
        else if (!strcmp(a, "--count")) O.count = atoi(v);
        else if (!strcmp(a, "--secs")) O.secs = atof(v);
        else if (!strcmp(a, "--warmup")) O.warmup = atof(v);
        else if (!strcmp(a, "--timeout")) O.timeout = atof(v);
        else usage();
    }
    if (!O.addr)
        die("%s", "--addr is required");
    if (O.conc < 1)
        O.conc = 1;
    grpc_init();
    int rc;
    if (!strcmp(cmd, "run"))
        rc = cmd_run();
    else if (!strcmp(cmd, "setup"))
        rc = cmd_setup();
    else if (!strcmp(cmd, "teardown"))
        rc = cmd_teardown();
    else
        usage();
    grpc_shutdown();
    return rc;
}
