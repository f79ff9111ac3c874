/* descindex.h — an index over a serialized FileDescriptorSet (what `protoc
 * --descriptor_set_out --include_imports` writes): each file's serialized
 * FileDescriptorProto, its dependencies, and every fully-qualified symbol
 * (messages, nested messages, enums, services, methods) it defines. Server
 * reflection answers from it; nothing is decoded past the names. The index
 * borrows the set's bytes: they must outlive it (a build-time constant). */
#ifndef SG_RPC_DESCINDEX_H
#define SG_RPC_DESCINDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct rpc_descfile {
    char *name;                 /* owned */
    const uint8_t *data;        /* borrowed: the FileDescriptorProto bytes */
    size_t len;
    size_t *deps;               /* owned: indexes into files[] */
    size_t n_deps;
} rpc_descfile;

typedef struct rpc_descsym {
    char *name;                 /* owned, e.g. "sandgate.v1.Sandboxes.RunCode" */
    size_t file;
} rpc_descsym;

typedef struct rpc_descindex {
    rpc_descfile *files;        /* owned */
    size_t n_files;
    rpc_descsym *syms;          /* owned, sorted by name */
    size_t n_syms;
} rpc_descindex;

/* 0, or -1 with err set when the bytes are not a well-formed set (a
 * dependency that names no file in the set is an error too). */
int rpc_descindex_init(rpc_descindex *ix, const uint8_t *set, size_t len, sg_err *err);
void rpc_descindex_cleanup(rpc_descindex *ix);
/* Index of the file, or -1. */
long rpc_descindex_file(const rpc_descindex *ix, const char *name);
/* Index of the file that defines symbol, or -1. */
long rpc_descindex_symbol(const rpc_descindex *ix, const char *symbol);

#endif
