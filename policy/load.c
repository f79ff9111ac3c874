/* load.c — the policy object's life: read the file, parse, validate, hash,
 * hand out refs, free on the last unref. A policy is immutable once this
 * returns it, so any number of threads may read it while the gateway swaps
 * in a new one (the refcount is atomic). A file with any error never yields
 * a policy. Leaves the schema to validate.c. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/internal.h"
#include "policy/lint.h"

#define POLICY_MAX_BYTES (64u << 20)

/* Fetched once: SHA256() and EVP_sha256() look the algorithm up in the
 * provider store on every call, a third of the hash's cost on each request. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;
static void sha256_fetch(void) { sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL); }

void policy_hash_key(const char *key, size_t len, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[SHA256_DIGEST_LENGTH];
    pthread_once(&sha256_once, sha256_fetch);
    if (!sha256_md || !EVP_Digest(key, len, md, NULL, sha256_md, NULL))
        SHA256((const unsigned char *)key, len, md);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = 0;
}

int policy_read_file(const char *path, char **buf, size_t *len, sg_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sg_err_errno(err, SG_EINVAL, "open(%s)", path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = sg_err_errno(err, SG_EINVAL, "fstat(%s)", path);
        close(fd);
        return e;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > POLICY_MAX_BYTES) {
        close(fd);
        if (!S_ISREG(st.st_mode))
            return sg_err_set(err, SG_EINVAL, "%s: not a regular file", path);
        return sg_err_set(err, SG_EINVAL, "%s: larger than %u bytes", path, POLICY_MAX_BYTES);
    }
    size_t cap = (size_t)st.st_size, n = 0;
    char *b = malloc(cap + 1);
    if (!b) {
        close(fd);
        return sg_err_set(err, SG_EINTERNAL, "%s: out of memory", path);
    }
    while (n < cap) {
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(b);
            close(fd);
            return sg_err_errno(err, SG_EINVAL, "read(%s)", path);
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

static int build(const char *name, const char *yaml, size_t len, const char *keys_name,
                 const char *keys, size_t keys_len, policy **out, policy_errors *errs,
                 policy_errors *warns);

int policy_lint_buffer(const char *name, const char *yaml, size_t len,
                       policy **out, policy_errors *errs, policy_errors *warns)
{
    return build(name, yaml, len, NULL, NULL, 0, out, errs, warns);
}

int policy_load_buffers(const char *name, const char *yaml, size_t len, const char *keys_name,
                        const char *keys, size_t keys_len, policy **out, policy_errors *errs)
{
    return build(name, yaml, len, keys_name, keys, keys_len, out, errs, NULL);
}

static int build(const char *name, const char *yaml, size_t len, const char *keys_name,
                 const char *keys, size_t keys_len, policy **out, policy_errors *errs,
                 policy_errors *warns)
{
    *out = NULL;
    policy *p = calloc(1, sizeof *p);
    if (!p)
        return SG_EINTERNAL;
    atomic_init(&p->refs, 1);
    pol_diag d = {.file = name, .errs = errs, .warns = warns};
    /* The tree lives in the policy's arena, so the policy borrows its
     * strings instead of copying them; it costs a few bytes per node. */
    ynode *root = pol_parse(&p->arena, &d, yaml, len);
    if (d.n_errs == 0)
        pol_build(p, &d, root);
    if (d.n_errs == 0 && keys_name) {
        /* the keys file's digests join the tenants (keys_file.c); its
         * errors name it, and any of them rejects the whole load */
        pol_diag kd = {.file = keys_name, .errs = errs};
        ynode *kroot = pol_parse(&p->arena, &kd, keys, keys_len);
        if (kd.n_errs == 0)
            pol_add_key_file(p, &kd, kroot);
        d.n_errs += kd.n_errs;
    }
    if (d.n_errs) {
        pol_arena_cleanup(&p->arena);
        free(p);
        return SG_EINVAL;
    }
    policy_hash_key(yaml, len, p->hash);
    *out = p;
    return 0;
}

int policy_lint_file(const char *path, policy **out, policy_errors *errs, policy_errors *warns)
{
    char *buf;
    size_t len;
    sg_err err;
    *out = NULL;
    if (policy_read_file(path, &buf, &len, &err) < 0) {
        if (errs)
            pol_errors_push(errs, strdup(err.msg));
        return SG_EINVAL;
    }
    int r = policy_lint_buffer(path, buf, len, out, errs, warns);
    free(buf);
    return r;
}

int policy_load_file(const char *path, policy **out, policy_errors *errs)
{
    return policy_lint_file(path, out, errs, NULL);
}

int policy_load_buffer(const char *name, const char *yaml, size_t len,
                       policy **out, policy_errors *errs)
{
    return policy_lint_buffer(name, yaml, len, out, errs, NULL);
}

policy *policy_ref(policy *p)
{
    if (p)
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

void policy_unref(policy *p)
{
    if (!p)
        return;
    /* acq_rel: the freeing thread must see every other thread's reads done */
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) {
        pol_arena_cleanup(&p->arena);
        free(p);
    }
}

const char *policy_hash(const policy *p)
{
    return p->hash;
}

static long lookup(const pol_index *ix, const char *s)
{
    size_t n;
    const uint32_t *v = s ? pol_index_get(ix, s, strlen(s), &n) : NULL;
    return v && n ? (long)v[0] : -1;
}

const pol_tenant *pol_tenant_find(const policy *p, const char *id)
{
    long i = lookup(&p->by_tenant, id);
    return i < 0 ? NULL : &p->tenants[i];
}

const pol_template *pol_template_find(const policy *p, const char *name)
{
    long i = lookup(&p->by_template, name);
    return i < 0 ? NULL : &p->templates[i];
}

const pol_secret *pol_secret_find(const policy *p, const char *name)
{
    long i = lookup(&p->by_secret, name);
    return i < 0 ? NULL : &p->secrets[i];
}
