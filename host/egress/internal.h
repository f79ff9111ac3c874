/* internal.h — what the host/egress/ files share and their tests see: the
 * pure parsers (parse.c), the host-name check (match.c) and the resolver
 * (resolve.c). The module's API is egress.h. */
#ifndef SG_EGRESS_INTERNAL_H
#define SG_EGRESS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define EG_HEAD_MAX 16384      /* request head, bytes */
#define EG_HELLO_MAX 16384     /* ClientHello handshake message, bytes */

/* Host names: NULL ok (lowercased, trailing dot dropped, into out), else
 * the reason. Wildcards are not names. */
const char *egress_host_check(const char *s, char *out, size_t cap);

typedef enum { EG_REQ_CONNECT = 1, EG_REQ_HTTP = 2 } eg_req_kind;

typedef struct eg_req {
    eg_req_kind kind;
    char method[16];
    char host[256];          /* as asked; an IPv6 literal without brackets */
    uint32_t port;
    size_t head_len;         /* bytes of the head in the input, incl. the blank line */
    int64_t content_length;  /* HTTP: -1 = no body */
    char *out_head;          /* HTTP: owned, the head to send upstream (origin-form) */
    size_t out_len;
} eg_req;
void eg_req_cleanup(eg_req *r);

/* Parse a proxy request head from buf[0..len). Returns 1 when complete (r
 * filled; free with eg_req_cleanup), 0 when more bytes are needed, or an
 * HTTP status (400, 405, 411, 431, 501) with *why naming the problem. */
int eg_parse_request(const char *buf, size_t len, eg_req *r, const char **why);

/* "host[:port]" or "[v6][:port]" (n bytes). port: required when defport 0.
 * 0 ok, -1 bad. host is copied without brackets. */
int eg_parse_authority(const char *s, size_t n, char *host, size_t cap, uint32_t *port,
                       uint32_t defport);

/* Find the SNI host name in the first bytes a client sent in a tunnel. */
enum { EG_TLS_BAD = -1, EG_TLS_MORE = 0, EG_TLS_SNI = 1, EG_TLS_NO_SNI = 2 };
int eg_tls_sni(const uint8_t *buf, size_t len, char *sni, size_t cap, const char **why);

/* Case-insensitive host equality ignoring one trailing dot. */
int eg_host_eq(const char *a, const char *b);

/* ---- resolver (resolve.c) ------------------------------------------------ */
#define EG_ADDR_MAX 8
typedef struct eg_addrs {
    struct sockaddr_storage a[EG_ADDR_MAX];
    socklen_t len[EG_ADDR_MAX];
    size_t n;
    int err;                 /* 0, or an EAI_* code / -1 */
} eg_addrs;

/* Blocking lookup: the hosts file first (every line naming host, in order),
 * then getaddrinfo unless hosts_only. Port set in each address. */
void eg_resolve(const char *hosts_file, int hosts_only, const char *host, uint16_t port,
                eg_addrs *out);

#endif
