/* cadence/hostrate.c: the controller's per-host tallies and the gang's failure rate from them (see
 * hostrate.h; the estimator and why it is shrunk: docs/cadence.md, "Per-host rates"). */
#include "cadence/hostrate.h"

#include <string.h>

#include "core/name_index.h"
#include "ftl/core.h"

typedef struct host_entry {
  char host[64];
  double k, e;
} host_entry;

/* The entries, and an index of them by name (core/name_index.h). */
struct cd_host_table {
  host_entry *entries;
  size_t n, cap_entries;
  core_name_index ix;
};

cd_host_table *cd_host_table_new(void) { return ftl_calloc(1, sizeof(cd_host_table)); }

void cd_host_table_free(cd_host_table *t) {
  if (!t) return;
  ftl_free(t->entries);
  core_name_index_free(&t->ix);
  ftl_free(t);
}

/* The name as the ledger keeps it: at most 63 bytes. */
static void key_of(const char *host, char key[64]) {
  size_t n = strnlen(host, 63);
  memcpy(key, host, n);
  key[n] = '\0';
}

static int host_is(const void *entries, size_t i, const char *key, const char *unused) {
  (void)unused;
  return !strcmp(((const host_entry *)entries)[i].host, key);
}

static long find(const cd_host_table *t, const char *key) {
  return core_name_index_find(&t->ix, core_name_hash(key, NULL), key, NULL, host_is, t->entries);
}

int cd_host_add(cd_host_table *t, const char *host, double failures, double rank_hours) {
  if (!t || !host || !host[0]) return 0;
  char key[64];
  key_of(host, key);
  long at = find(t, key);
  if (at >= 0) {
    t->entries[at].k += failures;
    t->entries[at].e += rank_hours;
    return 1;
  }
  if (t->n >= CD_MAX_HOSTS) return 0;
  if (t->n == t->cap_entries) {
    size_t cap = t->cap_entries ? t->cap_entries * 2 : 64;
    host_entry *e = ftl_realloc(t->entries, cap * sizeof *e);
    if (!e) return -1;
    t->entries = e;
    t->cap_entries = cap;
  }
  host_entry *e = &t->entries[t->n];
  memcpy(e->host, key, sizeof key);
  e->k = failures;
  e->e = rank_hours;
  if (core_name_index_put(&t->ix, core_name_hash(key, NULL), t->n)) return -1;
  t->n++;
  return 1;
}

int cd_host_get(const cd_host_table *t, const char *host, double *failures, double *rank_hours) {
  *failures = *rank_hours = 0;
  if (!t || !host) return 0;
  char key[64];
  key_of(host, key);
  long at = find(t, key);
  if (at < 0) return 0;
  *failures = t->entries[at].k;
  *rank_hours = t->entries[at].e;
  return 1;
}

cd_gang_rate cd_host_gang_rate(const cd_host_table *t, const ftl_cadence_gang_host *gang, size_t n, int64_t world,
                               double alpha0, double pooled) {
  cd_gang_rate g = {.factor = 1, .worst_rate = pooled};
  double placed = 0;
  /* The pooled rate as a prior worth α₀ failures: a host with no history gets exactly the pooled
   * rate, one with a long clean history drifts below it, one with failures above it, by as much as
   * its own exposure supports. */
  double beta = alpha0 / pooled;
  for (size_t i = 0; i < n; i++) {
    double k, e;
    (void)cd_host_get(t, gang[i].host, &k, &e);
    double r = (alpha0 + k) / (beta + e);
    g.rate += (double)gang[i].ranks * r;
    placed += (double)gang[i].ranks;
    if (i == 0 || r > g.worst_rate) {
      g.worst = i;
      g.worst_rate = r;
      g.worst_k = k;
      g.worst_e = e;
    }
  }
  if ((double)world > placed) g.rate += ((double)world - placed) * pooled;
  double all = (double)world > placed ? (double)world : placed;
  g.factor = all > 0 ? g.rate / (all * pooled) : 1;
  return g;
}
