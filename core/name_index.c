/* core/name_index.c: names to positions, open addressing (see name_index.h). */
#include "core/name_index.h"

#include "ftl/core.h"

uint64_t core_name_hash(const char *a, const char *b) {
  uint64_t h = 1469598103934665603ull;
  for (; a && *a; a++)
    h = (h ^ (unsigned char)*a) * 1099511628211ull;
  if (b) {
    h = (h ^ 0xffu) * 1099511628211ull; /* ("ab", "c") and ("a", "bc") hash apart */
    for (; *b; b++)
      h = (h ^ (unsigned char)*b) * 1099511628211ull;
  }
  return h;
}

long core_name_index_find(const core_name_index *ix, uint64_t hash, const char *a, const char *b, core_name_is is,
                          const void *entries) {
  if (!ix->cap) return -1;
  for (size_t j = (size_t)hash & (ix->cap - 1); ix->slots[j].pos1; j = (j + 1) & (ix->cap - 1))
    if (ix->slots[j].hash == hash && is(entries, ix->slots[j].pos1 - 1, a, b)) return (long)ix->slots[j].pos1 - 1;
  return -1;
}

static void place(core_name_slot *slots, size_t cap, uint64_t hash, uint32_t pos1) {
  size_t j = (size_t)hash & (cap - 1);
  while (slots[j].pos1) j = (j + 1) & (cap - 1);
  slots[j] = (core_name_slot){.hash = hash, .pos1 = pos1};
}

int core_name_index_put(core_name_index *ix, uint64_t hash, size_t pos) {
  if (pos >= UINT32_MAX) return -1;
  if (2 * (ix->count + 1) > ix->cap) {
    size_t cap = ix->cap ? ix->cap * 2 : 128;
    core_name_slot *s = ftl_calloc(cap, sizeof *s);
    if (!s) return -1;
    for (size_t j = 0; j < ix->cap; j++)
      if (ix->slots[j].pos1) place(s, cap, ix->slots[j].hash, ix->slots[j].pos1);
    ftl_free(ix->slots);
    ix->slots = s;
    ix->cap = cap;
  }
  place(ix->slots, ix->cap, hash, (uint32_t)(pos + 1));
  ix->count++;
  return 0;
}

void core_name_index_free(core_name_index *ix) {
  ftl_free(ix->slots);
  *ix = (core_name_index){0};
}
