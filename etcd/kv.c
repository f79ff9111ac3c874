/* kv.c — blocking conveniences over the KV and Lease calls: put, get,
 * create-if-absent (one transaction: compare the key's create revision to
 * 0, put on success, read it back on failure) and lease grant. */
#include <stdlib.h>
#include <string.h>

#include "etcd/internal.h"

size_t etcd_prefix_end(const char *prefix, uint8_t *out, size_t cap)
{
    size_t n = strlen(prefix);
    if (n == 0 || n > cap)
        return 0;
    memcpy(out, prefix, n);
    while (n > 0 && out[n - 1] == 0xff)
        n--;   /* "a\xff" + 1 is "b" */
    if (n == 0) {
        out[0] = 0;   /* every key */
        return 1;
    }
    out[n - 1]++;
    return n;
}

static ProtobufCBinaryData bin(const void *p, size_t n)
{
    return (ProtobufCBinaryData){n, (uint8_t *)p};
}

int etcd_put_sync(etcd_client *c, const char *key, const void *val, size_t len, int64_t lease,
                  sg_err *err)
{
    Etcdserverpb__PutRequest r;
    etcdserverpb__put_request__init(&r);
    r.key = bin(key, strlen(key));
    r.value = bin(val, len);
    r.lease = lease;
    ProtobufCMessage *resp = NULL;
    if (etcd_call_sync(c, ETCD_PUT, &r.base, &resp, err) != 0)
        return -1;
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
}

static char *copy_value(const Etcdserverpb__KeyValue *kv, size_t *len)
{
    char *v = malloc(kv->value.len + 1);
    memcpy(v, kv->value.data, kv->value.len);
    v[kv->value.len] = 0;
    if (len)
        *len = kv->value.len;
    return v;
}

int etcd_get_sync(etcd_client *c, const char *key, char **val, size_t *len, sg_err *err)
{
    Etcdserverpb__RangeRequest r;
    etcdserverpb__range_request__init(&r);
    r.key = bin(key, strlen(key));
    ProtobufCMessage *m = NULL;
    *val = NULL;
    if (etcd_call_sync(c, ETCD_RANGE, &r.base, &m, err) != 0)
        return -1;
    Etcdserverpb__RangeResponse *resp = (Etcdserverpb__RangeResponse *)m;
    if (resp->n_kvs > 0)
        *val = copy_value(resp->kvs[0], len);
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

int etcd_create_sync(etcd_client *c, const char *key, const char *val, int64_t lease,
                     int *created, char **existing, sg_err *err)
{
    Etcdserverpb__Compare cmp;
    etcdserverpb__compare__init(&cmp);
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    cmp.key = bin(key, strlen(key));
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    cmp.create_revision = 0;
    Etcdserverpb__PutRequest put;
    etcdserverpb__put_request__init(&put);
    put.key = cmp.key;
    put.value = bin(val, strlen(val));
    put.lease = lease;
    Etcdserverpb__RangeRequest get;
    etcdserverpb__range_request__init(&get);
    get.key = cmp.key;
    Etcdserverpb__RequestOp on_ok, on_fail;
    etcdserverpb__request_op__init(&on_ok);
    on_ok.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    on_ok.request_put = &put;
    etcdserverpb__request_op__init(&on_fail);
    on_fail.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    on_fail.request_range = &get;
    Etcdserverpb__Compare *cmps[] = {&cmp};
    Etcdserverpb__RequestOp *ok_ops[] = {&on_ok}, *fail_ops[] = {&on_fail};
    Etcdserverpb__TxnRequest txn;
    etcdserverpb__txn_request__init(&txn);
    txn.n_compare = 1;
    txn.compare = cmps;
    txn.n_success = 1;
    txn.success = ok_ops;
    txn.n_failure = 1;
    txn.failure = fail_ops;
    ProtobufCMessage *m = NULL;
    if (etcd_call_sync(c, ETCD_TXN, &txn.base, &m, err) != 0)
        return -1;
    Etcdserverpb__TxnResponse *resp = (Etcdserverpb__TxnResponse *)m;
    *created = resp->succeeded;
    if (existing) {
        *existing = NULL;
        if (resp->succeeded)
            *existing = strdup(val);
        else if (resp->n_responses == 1 && resp->responses[0]->response_range &&
                 resp->responses[0]->response_range->n_kvs > 0)
            *existing = copy_value(resp->responses[0]->response_range->kvs[0], NULL);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

int etcd_lease_grant_sync(etcd_client *c, int64_t ttl_s, int64_t *id, sg_err *err)
{
    Etcdserverpb__LeaseGrantRequest r;
    etcdserverpb__lease_grant_request__init(&r);
    r.ttl = ttl_s;
    ProtobufCMessage *m = NULL;
    if (etcd_call_sync(c, ETCD_LEASE_GRANT, &r.base, &m, err) != 0)
        return -1;
    Etcdserverpb__LeaseGrantResponse *resp = (Etcdserverpb__LeaseGrantResponse *)m;
    int rc = 0;
    if (resp->error && resp->error[0])
        rc = sg_err_set(err, SG_EUNAVAIL, "etcd lease grant: %.200s", resp->error);
    *id = resp->id;
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}
