/* tls.c — the client's TLS to etcd members: read the CA, client certificate
 * and key an etcd_tls names, check them with OpenSSL before any member is
 * dialled (so a missing, unreadable or mismatched file stops the daemon at
 * start with the file named, not later as an anonymous handshake failure),
 * and make grpc's ssl channel credentials from them. The handshake itself
 * (the members' certificates checked against the CA and the server name)
 * is grpc's; client.c sets the server-name override on each channel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "etcd/internal.h"

#define PEM_MAX (1 << 20)

/* The file's bytes, NUL-terminated, in *out (malloc'd). */
static int slurp(const char *what, const char *path, char **out, sg_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return sg_err_errno(err, SG_EINVAL, "registry.tls.%s: fopen(%s)", what, path);
    char *buf = malloc(PEM_MAX + 1);
    size_t n = buf ? fread(buf, 1, PEM_MAX + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad || n > PEM_MAX || n == 0) {
        free(buf);
        return sg_err_set(err, SG_EINVAL, "registry.tls.%s: %s: %s", what, path,
                          bad ? "read error" : n ? "larger than 1 MiB" : "empty file");
    }
    buf[n] = 0;
    *out = buf;
    return 0;
}

static void burn(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static void ssl_why(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, buf, cap);
    else
        snprintf(buf, cap, "no PEM data");
    ERR_clear_error();
}

/* ca: at least one certificate; cert: a certificate whose key is key. */
static int check_pem(const etcd_tls *t, const char *ca, const char *cert, const char *key,
                     sg_err *err)
{
    char why[160];
    BIO *b = BIO_new_mem_buf(ca, -1);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    if (!x) {
        ssl_why(why, sizeof why);
        return sg_err_set(err, SG_EINVAL, "registry.tls.ca: %s: no PEM certificate (%s)", t->ca,
                          why);
    }
    X509_free(x);
    if (!cert)
        return 0;
    b = BIO_new_mem_buf(cert, -1);
    x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    if (!x) {
        ssl_why(why, sizeof why);
        return sg_err_set(err, SG_EINVAL, "registry.tls.cert: %s: no PEM certificate (%s)",
                          t->cert, why);
    }
    b = BIO_new_mem_buf(key, -1);
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    int rc = 0;
    if (!k) {
        ERR_clear_error();   /* its text could quote the key file; name the file only */
        rc = sg_err_set(err, SG_EINVAL,
                        "registry.tls.key: %s: no unencrypted PEM private key", t->key);
    } else if (X509_check_private_key(x, k) != 1) {
        ERR_clear_error();
        rc = sg_err_set(err, SG_EINVAL, "registry.tls: the key %s is not the key of %s",
                        t->key, t->cert);
    }
    EVP_PKEY_free(k);
    X509_free(x);
    return rc;
}

/* Read and check every file; on success *ca, *cert, *key are the PEM
 * texts (cert and key NULL when the config names none). */
static int load(const etcd_tls *t, char **ca, char **cert, char **key, sg_err *err)
{
    *ca = *cert = *key = NULL;
    if (!t->ca)
        return sg_err_set(err, SG_EINVAL, "registry.tls: no 'ca' file");
    if (!t->cert != !t->key)
        return sg_err_set(err, SG_EINVAL, "registry.tls: 'cert' and 'key' go together");
    if (slurp("ca", t->ca, ca, err) != 0 ||
        (t->cert && slurp("cert", t->cert, cert, err) != 0) ||
        (t->key && slurp("key", t->key, key, err) != 0) || check_pem(t, *ca, *cert, *key, err) != 0) {
        free(*ca);
        free(*cert);
        burn(*key);
        *ca = *cert = *key = NULL;
        return -1;
    }
    return 0;
}

int etcd_tls_check(const etcd_tls *t, sg_err *err)
{
    char *ca, *cert, *key;
    if (load(t, &ca, &cert, &key, err) != 0)
        return -1;
    free(ca);
    free(cert);
    burn(key);
    return 0;
}

grpc_channel_credentials *etcd_tls_creds(const etcd_tls *t, sg_err *err)
{
    char *ca, *cert, *key;
    if (load(t, &ca, &cert, &key, err) != 0)
        return NULL;
    grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
    /* grpc copies the PEM texts: ours can be wiped at once. */
    grpc_channel_credentials *c = grpc_ssl_credentials_create(ca, cert ? &pair : NULL, NULL, NULL);
    free(ca);
    free(cert);
    burn(key);
    if (!c)
        sg_err_set(err, SG_EINTERNAL, "registry.tls: grpc_ssl_credentials_create failed");
    return c;
}
