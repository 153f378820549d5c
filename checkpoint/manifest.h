/* checkpoint/manifest.h: the in-memory model of a checkpoint (items, shards, pieces) and the
 * manifest.json that commits it: serialise, parse, validate. Used by the writer (rank 0), by
 * restore (every rank parses the bytes rank 0 read) and by `ftl ckpt`. The format is documented in
 * docs/formats/manifest.md.
 *
 * Not here: any I/O (the caller reads and writes the bytes), MPI. */
#ifndef FTL_CKPT_MANIFEST_H
#define FTL_CKPT_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/dtype.h"
#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CK_MANIFEST_VERSION 1
#define CK_NAME_MAX 128
#define CK_MAX_DIMS 8
#define CK_FILE_MAX 64
/* The largest manifest written or read: bounded, as every file from outside is, and room for the
 * largest gang a job spec allows (1,048,576 ranks: about 650 MiB at 4 pieces a shard, about 640
 * bytes each; docs/scale.md). It was 64 MiB, which a gang of 131,072 ranks (82 MiB) outgrew. */
#define CK_MANIFEST_MAX_BYTES (1u << 30)

/* How an item is spread over the ranks. Rows are slices along dimension 0 (a 0-d tensor is one
 * row); a blob is a 1-d u8 item whose rows are its bytes. */
typedef enum ck_kind {
  CK_KIND_SPLIT = 0,         /* each rank owns a contiguous row range (ftl_ckpt_split_rows) */
  CK_KIND_REPLICATED = 1,    /* every rank holds all rows; rank r writes its split range */
  CK_KIND_BLOB_GLOBAL = 2,   /* rank 0's bytes, given to every rank on restore */
  CK_KIND_BLOB_PER_RANK = 3, /* each rank's own bytes; shard r holds rank r's */
} ck_kind;

typedef struct ck_item {
  char name[CK_NAME_MAX];
  ftl_dtype dtype;
  ck_kind kind;
  int ndim;
  int64_t shape[CK_MAX_DIMS]; /* global shape (per-rank size for a per-rank blob) */
} ck_item;

/* One dataset of one shard: rows [row_start, row_start+row_count) of item `item`. */
typedef struct ck_piece {
  int item;
  int64_t row_start, row_count;
  uint64_t file_offset, size_bytes, checksum;
} ck_piece;

#define CK_HOST_MAX 64

typedef struct ck_shard {
  int rank;
  char file[CK_FILE_MAX];
  char l1_host[CK_HOST_MAX]; /* the host whose L1 level holds a copy (checkpoint/levels.h); "" none */
  char l2_host[CK_HOST_MAX]; /* the partner host that holds the L2 copy (ckpt_l2.c); "" none */
  uint64_t size_bytes, checksum;
  int npieces;
  ck_piece *pieces; /* owned */
} ck_shard;

typedef struct ck_manifest {
  int version;
  int64_t step;
  int world_size;
  int64_t created_unix_us;
  char job_spec_hash[136]; /* "" when unknown */
  /* 1: the step is committed in the run directory (L3; `levels` names l3, or there is no
   * `levels`); 0: an L1/L2 step, committed by this manifest in the hosts' L1 folders only, every
   * shard with an l1_host (docs/formats/manifest.md). ck_manifest_alloc sets 1. */
  int l3;
  int nitems;
  ck_item *items;   /* owned */
  ck_shard *shards; /* owned, world_size entries, shards[r].rank == r */
} ck_manifest;

/* The manifest's dtype names ("f32", "bf16"; "?" for a value not in the enum) and their parser.
 * Element sizes: ftl_dtype_size (ftl/dtype.h). */
const char *ck_dtype_name(ftl_dtype dt);
int ck_dtype_parse(const char *s, ftl_dtype *out); /* 0 ok, -1 unknown */
const char *ck_kind_name(ck_kind k);

/* Rows along dim 0 (1 for a 0-d item) and bytes per row; 0 with *overflow set on overflow. */
int64_t ck_item_rows(const ck_item *it);
uint64_t ck_item_row_bytes(const ck_item *it, int *overflow);

/* The balanced split of `rows` over `world`: rank r gets count rows starting at start. */
void ck_split_rows(int64_t rows, int rank, int world, int64_t *start, int64_t *count);

/* "shard-00003.h5". */
void ck_shard_file_name(int rank, char out[CK_FILE_MAX]);

/* Serialises m as JSON text (caller frees *text_out with ftl_free). */
ftl_err ck_manifest_to_json(const ck_manifest *m, char **text_out, size_t *len_out, ftl_diag *d);

/* Parses and validates untrusted text: every field present with the right type, names and file
 * names safe, pieces inside their shard and not overlapping, sizes consistent with dtype and
 * shape, and every split/replicated tensor and global blob covered exactly once. FTL_ERR_CORRUPT
 * with the field at fault in d. *out is freed with ck_manifest_free. */
ftl_err ck_manifest_parse(const char *text, size_t len, ck_manifest **out, ftl_diag *d);

/* Allocates an empty manifest with nitems items and world_size shards (pieces not allocated). */
ck_manifest *ck_manifest_alloc(int nitems, int world_size);
void ck_manifest_free(ck_manifest *m);

/* Index of the item named `name`, or -1. */
int ck_manifest_find_item(const ck_manifest *m, const char *name);

/* Checks a name is usable as an HDF5 link name and a JSON key without escaping surprises:
 * 1..127 bytes of [A-Za-z0-9_.-], not starting with '.'. */
int ck_name_ok(const char *name);

#ifdef __cplusplus
}
#endif
#endif
