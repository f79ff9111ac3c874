/* page_token.h — ListSandboxes' page tokens: made from the last sandbox id
 * of a page, parsed back into the cursor the hosts list after. */
#ifndef SG_GW_PAGE_TOKEN_H
#define SG_GW_PAGE_TOKEN_H

#include <stddef.h>

/* "sgp1." + base64url(id), cut to fit cap (256 holds any sandbox id). */
void gw_page_token_make(const char *id, char *out, size_t cap);
/* 0 and the cursor id (NUL-terminated, a valid sandbox id), or -1: not a
 * token this API issued. */
int gw_page_token_parse(const char *tok, char *id, size_t cap);

#endif
