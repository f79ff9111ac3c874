/* mtls.c — verifying a client certificate against the gateway's client CA.
 *
 * The listener asks for a certificate but lets the handshake finish without
 * one or with one it cannot verify, so that API-key tenants need no
 * certificate and a bad certificate is refused as UNAUTHENTICATED (like a
 * bad key) instead of a transport error. The verification itself happens
 * here, before the identity in the certificate is believed. Verified leaves
 * are remembered for a minute (keyed by the certificate's SHA-256) so a
 * connection's calls do not verify the chain every time. */
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "tenancy/tenancy.h"

#define UNAUTH_MSG "unauthenticated: missing or invalid credentials"
#define CACHE 256
#define CACHE_TTL_S 60

static X509_STORE *store;
static struct {
    unsigned char digest[32];
    time_t until;
} verified[CACHE];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

int tenancy_mtls_load_ca(const char *ca_pem, sg_err *err)
{
    BIO *b = BIO_new_mem_buf(ca_pem, -1);
    store = X509_STORE_new();
    int n = 0;
    X509 *ca;
    while (b && (ca = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        X509_STORE_add_cert(store, ca);
        X509_free(ca);
        n++;
    }
    BIO_free(b);
    ERR_clear_error();
    if (n == 0)
        return sg_err_set(err, SG_EINVAL, "tls.client_ca holds no PEM certificate");
    return 0;
}

static int cached(const unsigned char d[32], time_t now)
{
    int hit = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < CACHE && !hit; i++)
        hit = verified[i].until > now && memcmp(verified[i].digest, d, 32) == 0;
    pthread_mutex_unlock(&mu);
    return hit;
}

static void remember(const unsigned char d[32], time_t now)
{
    pthread_mutex_lock(&mu);
    int slot = d[0] % CACHE;
    memcpy(verified[slot].digest, d, 32);
    verified[slot].until = now + CACHE_TTL_S;
    pthread_mutex_unlock(&mu);
}

/* Chain check of leaf (PEM) with the untrusted intermediates of chain_pem. */
static int verify_chain(const char *leaf_pem, const char *chain_pem)
{
    BIO *b = BIO_new_mem_buf(leaf_pem, -1);
    X509 *leaf = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    STACK_OF(X509) *inter = sk_X509_new_null();
    if (chain_pem && (b = BIO_new_mem_buf(chain_pem, -1))) {
        X509 *c;
        while ((c = PEM_read_bio_X509(b, NULL, NULL, NULL)))
            sk_X509_push(inter, c);
        BIO_free(b);
    }
    int ok = 0;
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    if (leaf && ctx && X509_STORE_CTX_init(ctx, store, leaf, inter)) {
        X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
        ok = X509_verify_cert(ctx) == 1;
    }
    X509_STORE_CTX_free(ctx);
    sk_X509_pop_free(inter, X509_free);
    X509_free(leaf);
    ERR_clear_error();
    return ok;
}

int tenancy_mtls_verify(const char *leaf_pem, const char *chain_pem, sg_err *err)
{
    if (!store || !leaf_pem || !leaf_pem[0])
        return sg_err_set(err, SG_EUNAUTH, UNAUTH_MSG);
    unsigned char d[32];
    unsigned int dl = sizeof d;
    EVP_Digest(leaf_pem, strlen(leaf_pem), d, &dl, EVP_sha256(), NULL);
    time_t now = time(NULL);
    if (cached(d, now))
        return 0;
    if (!verify_chain(leaf_pem, chain_pem))
        return sg_err_set(err, SG_EUNAUTH, UNAUTH_MSG);
    remember(d, now);
    return 0;
}
