/* core/name_index.h: an index from names to the positions of a caller's array of named entries
 * (hosts, GPUs by host and UUID): open addressing over (hash, position + 1) slots, at most half
 * full. The caller owns the entries and says whether entry i bears a name; the index stores each
 * entry's hash, so growing it never asks for names again. One name is one or two strings (a GPU is
 * its host's name and its UUID). Not thread-safe. */
#ifndef FTL_CORE_NAME_INDEX_H
#define FTL_CORE_NAME_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct core_name_slot {
  uint64_t hash;
  uint32_t pos1; /* the entry's position + 1; 0: empty */
} core_name_slot;

typedef struct core_name_index {
  core_name_slot *slots;
  size_t cap, count;
} core_name_index;

/* Whether entry i of entries is named (a, b) (b NULL for one-string names). */
typedef int (*core_name_is)(const void *entries, size_t i, const char *a, const char *b);

/* FNV-1a of a, then of b after a separator (b may be NULL). */
uint64_t core_name_hash(const char *a, const char *b);

/* The position of the entry named (a, b) with that hash, or -1. */
long core_name_index_find(const core_name_index *ix, uint64_t hash, const char *a, const char *b, core_name_is is,
                          const void *entries);

/* Records entry pos (not in the index yet) under hash; grows the index when it would be more than
 * half full. 0, or -1 when out of memory (the index is unchanged). pos < UINT32_MAX. */
int core_name_index_put(core_name_index *ix, uint64_t hash, size_t pos);

/* Frees the slots; the index is empty again. */
void core_name_index_free(core_name_index *ix);

#endif
