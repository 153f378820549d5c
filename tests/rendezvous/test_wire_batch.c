/* tests/rendezvous/test_wire_batch.c: the relay batch's own parser (rendezvous/wire.c): its numbers
 * are strtod's bit for bit, whichever path reads them (the one-pass plain decimal, the exact decimal,
 * strtod itself), and the step entries' two forms (one compute number; the period's samples as a
 * list, wire version 4's cadence) give the same entries; a malformed line is taken not at all. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl_test.h"
#include "rendezvous/wire.h"

static void keep_compute(void *user, const rz_batch_entry *e) { *(double *)user = e->compute_ms; }

/* rz_wire_number, and a batch entry's compute (the parser's one-pass path first), against strtod on
 * the same text: taken whole or not at all, and the same bits. */
static void same_as_strtod(const char *text) {
  double got = -12345.0, in_batch = -12345.0;
  size_t n = rz_wire_number(text, strlen(text), &got);
  char line[128];
  snprintf(line, sizeof line, "{\"type\":\"batch\",\"step\":[[1,2,%s]]}", text);
  int taken = rz_wire_batch_parse(line, strlen(line), keep_compute, &in_batch) == FTL_OK;
  char *stop = NULL;
  double want = strtod(text, &stop);
  if (n == 0) {
    /* refused: strtod did not take it all, or it is not finite */
    CHECK(stop != text + strlen(text) || !isfinite(want));
    CHECK(!taken);
    return;
  }
  CHECK_INT_EQ((int)n, (int)strlen(text));
  CHECK(taken);
  if (memcmp(&got, &want, sizeof got) != 0) FTL_TEST_FAIL_("'%s': rz_wire_number %.17g, strtod %.17g", text, got, want);
  if (memcmp(&in_batch, &want, sizeof got) != 0) FTL_TEST_FAIL_("'%s': in a batch %.17g, strtod %.17g", text, in_batch, want);
}

static void test_numbers(void) {
  static const char *const fixed[] = {
      "0",      "-0",        "0.0",     "-0.000",  "10.000", "12.345",   ".5",        "5.",      "1e5",
      "1E-5",   "1e+22",     "1e23",    "1e-22",   "1e-23",  "123456789012345", "1234567890123456",
      "12345678901234567",   "9007199254740993",     "0.1",    "0.3",     "2.675",    "1e400",   "-1e400",
      "1e-400", "00012.50",  "+1",      "1.2.3",   "1-2",    "-",       ".",        "e5",      "1e",
      "4e+12",  "1500.5",    "1.25e+15", "3.7268473856e15", "0.000001", "999999999999999.9",
  };
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) same_as_strtod(fixed[i]);
  /* What relays write (%.3f samples, %.17g FLOPs) and a spread of other shapes. */
  srand(7);
  char text[64];
  for (int i = 0; i < 200000; i++) {
    double v = (double)rand() / RAND_MAX * pow(10.0, rand() % 24 - 8) * (rand() % 5 ? 1 : -1);
    switch (i % 6) {
      case 0: snprintf(text, sizeof text, "%.3f", v); break;
      case 1: snprintf(text, sizeof text, "%.17g", v); break;
      case 2: snprintf(text, sizeof text, "%g", v); break;
      case 3: snprintf(text, sizeof text, "%.1f", v); break;
      case 4: snprintf(text, sizeof text, "%.6e", v); break;
      default: snprintf(text, sizeof text, "%.0f", v); break;
    }
    same_as_strtod(text);
  }
}

typedef struct seen {
  int entries, samples;
  double last, flops;
  int64_t rank, step;
} seen;

static void on_entry(void *user, const rz_batch_entry *e) {
  seen *s = user;
  s->entries++;
  if (e->alive) return;
  s->samples += e->nsamples;
  s->last = e->compute_ms;
  CHECK(e->compute_ms == e->samples[e->nsamples - 1]);
  s->flops = e->has_flops ? e->flops : -1;
  s->rank = e->rank;
  s->step = e->step;
}

static int parse(const char *line, seen *s) {
  memset(s, 0, sizeof *s);
  return rz_wire_batch_parse(line, strlen(line), on_entry, s) == FTL_OK;
}

static void test_entries(void) {
  seen s;
  CHECK(parse("{\"type\":\"batch\",\"step\":[[3,9,12.5]]}", &s));
  CHECK(s.entries == 1 && s.samples == 1 && s.last == 12.5 && s.rank == 3 && s.step == 9 && s.flops == -1);
  CHECK(parse("{\"type\":\"batch\",\"step\":[[3,9,[1.000,2.500,12.345]],[4,9,[7.25],4e12,100.5]],"
              "\"alive\":[[3,\"S\",100]]}", &s));
  CHECK(s.entries == 3 && s.samples == 4 && s.last == 7.25 && s.flops == 4e12);
  /* sixteen samples fit; seventeen, none, or one that is no number, and the line is not taken */
  char line[512] = "{\"type\":\"batch\",\"step\":[[1,2,[";
  for (int k = 0; k < FTL_WIRE_MAX_SAMPLES; k++) strcat(line, k ? ",1.5" : "1.5");
  strcat(line, "]]]}");
  CHECK(parse(line, &s));
  CHECK_INT_EQ(s.samples, FTL_WIRE_MAX_SAMPLES);
  char *tail = strstr(line, "]]]}");
  memmove(tail + 4, tail, strlen(tail) + 1);
  memcpy(tail, ",2.0", 4);
  CHECK(!parse(line, &s));
  CHECK_INT_EQ(s.entries, 0);
  CHECK(!parse("{\"type\":\"batch\",\"step\":[[1,2,[]]]}", &s));
  CHECK(!parse("{\"type\":\"batch\",\"step\":[[1,2,[1.5,x]]]}", &s));
  CHECK(!parse("{\"type\":\"batch\",\"step\":[[1,2,[1.5]],[1,2,[1.5,]]]}", &s));
  CHECK_INT_EQ(s.entries, 0);
  CHECK(!parse("{\"type\":\"batch\",\"step\":[[1,2,1e999]]}", &s));
}

int main(void) {
  test_numbers();
  test_entries();
  return 0;
}
