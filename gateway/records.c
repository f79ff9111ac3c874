/* records.c — etcd mode: ListSandboxes from the registry, with no host
 * asked. Every live sandbox has a quota key live/<tenant>/<user>/<id>
 * (claims.c) whose value is its listing copy, a packed sandgate.v1.Sandbox
 * written with the claim and kept current by the host (its Extend rewrites
 * expires_at, host/core/registry.c); it goes with the sandbox's end or its
 * host's lease. So a user's sandboxes are one range of keys, already in
 * sandbox-id order (the id ends the key): a page is a range read after the
 * cursor, filtered by labels here, read on in chunks until the page is full
 * or the range ends. Completes on the etcd client's thread; a failed read
 * is reported to the caller, which falls back to asking the hosts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/regkeys.h"
#include "etcd/etcd.h"
#include "gateway/request.h"

#define CHUNK_MIN 64
#define CHUNK_MAX 1000
#define ROUNDS_MAX 64     /* chunks per call: a filter that matches little ends here */

typedef struct records_op {
    gw_req *r;                          /* borrowed until done() */
    gw_records_done done;
    char prefix[SG_REGKEY_MAX];         /* live/<t>/<u>/ */
    uint8_t start[SG_REGKEY_MAX + 2];   /* the next chunk's first key */
    size_t start_len;
    const Sandgate__V1__HostListRequest__MetadataEntry *const *want;   /* borrowed (r->msg) */
    size_t n_want;
    uint32_t limit;
    Sandgate__V1__Sandbox **items;      /* owned: unpacked */
    size_t n;
    int rounds;
    int64_t now_ms;
} records_op;

static void finish(records_op *op, int more, int failed)
{
    op->done(op->r, op->items, failed ? 0 : op->n, failed ? -1 : more);
    for (size_t i = 0; i < op->n; i++)
        protobuf_c_message_free_unpacked(&op->items[i]->base, NULL);
    free(op->items);
    free(op);
}

static int labels_match(const records_op *op, const Sandgate__V1__Sandbox *sb)
{
    for (size_t i = 0; i < op->n_want; i++) {
        int hit = 0;
        for (size_t k = 0; k < sb->n_metadata && !hit; k++)
            hit = strcmp(sb->metadata[k]->key, op->want[i]->key) == 0 &&
                  strcmp(sb->metadata[k]->value, op->want[i]->value) == 0;
        if (!hit)
            return 0;
    }
    return 1;
}

static void read_chunk(records_op *op);

static void on_chunk(void *arg, int code, ProtobufCMessage *m, const char *why)
{
    records_op *op = arg;
    rpc_call_log_context(op->r->in);
    if (code != 0) {
        sg_log_warn("registry: listing from etcd: %s; asking the hosts instead", why);
        finish(op, 0, 1);
        return;
    }
    Etcdserverpb__RangeResponse *rr = (Etcdserverpb__RangeResponse *)m;
    size_t pl = strlen(op->prefix);
    int stale = 0;
    for (size_t i = 0; i < rr->n_kvs && op->n < op->limit; i++) {
        const Etcdserverpb__KeyValue *kv = rr->kvs[i];
        Sandgate__V1__Sandbox *sb = (Sandgate__V1__Sandbox *)protobuf_c_message_unpack(
            &sandgate__v1__sandbox__descriptor, NULL, kv->value.len, kv->value.data);
        /* The copy names the key's own sandbox, or it is not one we wrote
         * (a key from before listings were kept, or damage): the hosts are
         * asked instead, so nothing is left out. */
        if (!sb || kv->key.len <= pl || strlen(sb->sandbox_id) != kv->key.len - pl ||
            memcmp(sb->sandbox_id, kv->key.data + pl, kv->key.len - pl) != 0 ||
            strcmp(sb->user_id, op->r->id.user) != 0) {
            if (sb)
                protobuf_c_message_free_unpacked(&sb->base, NULL);
            stale = 1;
            break;
        }
        /* past its expiry: its host is ending it this second */
        if ((sb->expires_at && sb->expires_at <= op->now_ms) || !labels_match(op, sb)) {
            protobuf_c_message_free_unpacked(&sb->base, NULL);
            continue;
        }
        op->items[op->n++] = sb;
    }
    int more = rr->more;
    if (rr->n_kvs) {
        const ProtobufCBinaryData *last = &rr->kvs[rr->n_kvs - 1]->key;
        size_t l = last->len < SG_REGKEY_MAX ? last->len : SG_REGKEY_MAX;
        memcpy(op->start, last->data, l);
        op->start[l] = 0;   /* the next key after it */
        op->start_len = l + 1;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (stale) {
        sg_log_info("registry: a listing copy in etcd is missing or stale; asking the hosts");
        finish(op, 0, 1);
    } else if (op->n < op->limit && more && ++op->rounds < ROUNDS_MAX) {
        read_chunk(op);
    } else {
        finish(op, more || op->n >= op->limit, 0);
    }
}

static void read_chunk(records_op *op)
{
    uint8_t end[SG_REGKEY_MAX];
    Etcdserverpb__RangeRequest rg;
    etcdserverpb__range_request__init(&rg);
    rg.key = (ProtobufCBinaryData){op->start_len, op->start};
    rg.range_end = (ProtobufCBinaryData){etcd_prefix_end(op->prefix, end, sizeof end), end};
    uint32_t chunk = op->limit < CHUNK_MIN ? CHUNK_MIN : op->limit;
    rg.limit = chunk > CHUNK_MAX ? CHUNK_MAX : chunk;
    sg_err e;
    if (etcd_call(gw_registry_etcd(), ETCD_RANGE, &rg.base, on_chunk, op, &e) != 0)
        on_chunk(op, SG_EUNAVAIL, NULL, e.msg);
}

void gw_records_list(gw_req *r, const char *after_id, const Sandgate__V1__HostListRequest *q,
                     gw_records_done done)
{
    records_op *op = calloc(1, sizeof *op);
    op->r = r;
    op->done = done;
    sg_regkey_live(G.cfg.registry.prefix, r->id.tenant, r->id.user, NULL, op->prefix,
                   sizeof op->prefix);
    /* strictly after the cursor: its own key plus a NUL byte */
    int n = snprintf((char *)op->start, sizeof op->start, "%s%s", op->prefix, after_id);
    op->start_len = (size_t)n + (after_id[0] ? 1 : 0);
    op->want = (const Sandgate__V1__HostListRequest__MetadataEntry *const *)q->metadata;
    op->n_want = q->n_metadata;
    op->limit = q->limit ? q->limit : 1;
    op->items = calloc(op->limit + 1, sizeof *op->items);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    op->now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    read_chunk(op);
}
