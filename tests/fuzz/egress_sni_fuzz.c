/* egress_sni_fuzz.c — libFuzzer target for the egress proxy's TLS
 * ClientHello reader (host/egress/parse.c eg_tls_sni): the first bytes a
 * sandbox sends inside a CONNECT tunnel, which decide whether the tunnel may
 * go on (the SNI must name the CONNECT host).
 *
 * Checks beyond "no crash, no leak, no UB": the result is one of the four
 * codes; a found name is 1..255 printable bytes, NUL-terminated within the
 * buffer; a refusal carries a reason; and a shorter prefix of the input
 * either asks for more bytes or gives the same answer and name (the proxy
 * calls it again as bytes arrive, so a prefix must never decide otherwise).
 * Seed corpus: tests/fuzz/corpus/egress_sni_fuzz/ (record-split, padded,
 * no-SNI and malformed hellos). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/egress/internal.h"

#define CHECK(cond)                                                      \
    do {                                                                 \
        if (!(cond)) {                                                   \
            fprintf(stderr, "egress_sni_fuzz: broken: %s\n", #cond);     \
            abort();                                                     \
        }                                                                \
    } while (0)

static int sni_of(const uint8_t *data, size_t size, char sni[256], const char **why)
{
    uint8_t *in = malloc(size ? size : 1);   /* exactly size bytes for ASan */
    CHECK(in);
    memcpy(in, data, size);
    memset(sni, 0x55, 256);
    *why = NULL;
    int rc = eg_tls_sni(in, size, sni, 256, why);
    free(in);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char sni[256];
    const char *why;
    int rc = sni_of(data, size, sni, &why);
    CHECK(rc == EG_TLS_BAD || rc == EG_TLS_MORE || rc == EG_TLS_SNI || rc == EG_TLS_NO_SNI);
    CHECK(why != NULL);
    if (rc == EG_TLS_BAD)
        CHECK(why[0]);
    if (rc == EG_TLS_SNI) {
        size_t n = strnlen(sni, sizeof sni);
        CHECK(n > 0 && n < sizeof sni);
        for (size_t i = 0; i < n; i++)
            CHECK((unsigned char)sni[i] > ' ' && (unsigned char)sni[i] < 0x7f);
        CHECK(eg_host_eq(sni, sni));
    }
    if (rc == EG_TLS_MORE || size == 0)
        return 0;
    size_t cuts[] = {size - 1, size / 2};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char s2[256];
        const char *w2;
        int prc = sni_of(data, cuts[i], s2, &w2);
        if (prc == EG_TLS_MORE)
            continue;
        if (prc != rc)
            fprintf(stderr, "prefix %zu of %zu: %d (%s), whole: %d (%s)\n", cuts[i], size, prc,
                    w2, rc, why);
        CHECK(prc == rc);
        if (rc == EG_TLS_SNI)
            CHECK(strcmp(s2, sni) == 0);
    }
    return 0;
}
