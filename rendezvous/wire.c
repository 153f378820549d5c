/* rendezvous/wire.c: line framing for the launcher <-> rank protocol (the sockets under it:
 * core/net.c). */
#include "rendezvous/wire.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ftl/core.h"

void rz_linebuf_free(rz_linebuf *lb) {
  ftl_free(lb->data);
  lb->data = NULL;
  lb->len = lb->cap = 0;
}

ftl_err rz_linebuf_fill(rz_linebuf *lb, int fd, bool *eof) {
  *eof = false;
  for (;;) {
    if (lb->cap - lb->len < 4096) {
      if (lb->cap >= FTL_WIRE_MAX_LINE * 2) return FTL_ERR_PROTO;
      size_t ncap = lb->cap ? lb->cap * 2 : 8192;
      char *nd = ftl_realloc(lb->data, ncap);
      if (!nd) return FTL_ERR_NOMEM;
      lb->data = nd;
      lb->cap = ncap;
    }
    ssize_t n = recv(fd, lb->data + lb->len, lb->cap - lb->len, MSG_DONTWAIT);
    if (n > 0) {
      lb->len += (size_t)n;
      continue;
    }
    if (n == 0) {
      *eof = true;
      return FTL_OK;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return FTL_OK;
    *eof = true; /* a reset connection is a closed one for our purposes */
    return FTL_OK;
  }
}

ftl_err rz_wire_parse(const char *line, size_t len, json_t **msg_out, ftl_diag *d) {
  json_error_t jerr;
  json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!msg) return ftl_diag_fail(d, FTL_ERR_PROTO, "malformed message: %s", jerr.text);
  if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "type"))) {
    json_decref(msg);
    return ftl_diag_fail(d, FTL_ERR_PROTO, "message is not an object with a string 'type'");
  }
  *msg_out = msg;
  return FTL_OK;
}

ftl_err rz_linebuf_next(rz_linebuf *lb, json_t **msg_out, ftl_diag *d) {
  char *nl = lb->len ? memchr(lb->data, '\n', lb->len) : NULL;
  if (!nl) {
    if (lb->len > FTL_WIRE_MAX_LINE) return ftl_diag_fail(d, FTL_ERR_PROTO, "message longer than %d bytes", FTL_WIRE_MAX_LINE);
    return FTL_ERR_NOTFOUND;
  }
  size_t line_len = (size_t)(nl - lb->data);
  ftl_err rc = rz_wire_parse(lb->data, line_len, msg_out, d);
  memmove(lb->data, nl + 1, lb->len - line_len - 1);
  lb->len -= line_len + 1;
  return rc;
}

static ftl_err send_all(int fd, const char *p, size_t left, int64_t deadline_ms, bool nowait, ftl_diag *d) {
  while (left > 0) {
    ssize_t n = send(fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      left -= (size_t)n;
      if (nowait && left > 0) {
        /* Once a message is started it must be finished, or framing breaks; but a peer that
         * takes none of the rest in a second is not waited for forever. */
        nowait = false;
        if (deadline_ms == FTL_NO_DEADLINE) deadline_ms = ftl_deadline_after_ms(1000);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (nowait) return FTL_ERR_TIMEOUT;
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      int left_ms = ftl_deadline_left_ms(deadline_ms);
      if (left_ms == 0) return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "send timed out");
      int pr = poll(&pfd, 1, left_ms);
      if (pr < 0 && errno != EINTR) return ftl_diag_fail(d, FTL_ERR_IO, "poll: %s", strerror(errno));
      continue;
    }
    return ftl_diag_fail(d, FTL_ERR_IO, "send: %s", n < 0 ? strerror(errno) : "connection closed");
  }
  return FTL_OK;
}

ftl_err rz_wire_encode(const json_t *msg, char **line_out, size_t *len_out, ftl_diag *d) {
  char *text = json_dumps(msg, JSON_COMPACT);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "cannot encode message");
  size_t len = strlen(text);
  ftl_err rc = FTL_OK;
  char *line = ftl_malloc(len + 1);
  if (!line) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  memcpy(line, text, len);
  line[len] = '\n';
  *line_out = line;
  *len_out = len + 1;
out:
  free(text); /* jansson allocated it with malloc */
  return rc;
}

ftl_err rz_wire_send_line(int fd, const char *line, size_t len, int64_t deadline_ms, bool nowait, ftl_diag *d) {
  return send_all(fd, line, len, deadline_ms, nowait, d);
}

static ftl_err wire_send(int fd, const json_t *msg, int64_t deadline_ms, bool nowait, ftl_diag *d) {
  char *line = NULL;
  size_t len = 0;
  ftl_err rc = rz_wire_encode(msg, &line, &len, d);
  if (rc == FTL_OK) rc = send_all(fd, line, len, deadline_ms, nowait, d);
  ftl_free(line);
  return rc;
}

ftl_err rz_wire_send(int fd, const json_t *msg, int64_t deadline_ms, ftl_diag *d) {
  return wire_send(fd, msg, deadline_ms, false, d);
}

ftl_err rz_wire_send_nowait(int fd, const json_t *msg, ftl_diag *d) {
  return wire_send(fd, msg, FTL_NO_DEADLINE, true, d);
}

/* --- the batch's fast path (wire.h) --------------------------------------------------------- */

typedef struct cursor {
  const char *p, *end;
} cursor;

static bool take(cursor *c, const char *lit) {
  size_t n = strlen(lit);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) return false;
  c->p += n;
  return true;
}

static bool take_int(cursor *c, int64_t *out) {
  bool neg = c->p < c->end && *c->p == '-';
  if (neg) c->p++;
  int64_t v = 0;
  int digits = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && digits < 18) {
    v = v * 10 + (*c->p++ - '0');
    digits++;
  }
  if (!digits || (c->p < c->end && *c->p >= '0' && *c->p <= '9')) return false;
  *out = neg ? -v : v;
  return true;
}

/* The characters strtod is handed for a number (as the wire always took them). */
static bool number_char(char ch) {
  return (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '+' || ch == 'e' || ch == 'E';
}

/* m * 10^e for a plain decimal, when both are exact doubles (m <= 2^53, |e| <= 22): then one
 * multiply or divide is correctly rounded, the value strtod gives (Clinger's fast path). */
static bool exact_decimal(const char *p, size_t n, double *out) {
  static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  size_t i = 0;
  bool neg = p[0] == '-', any = false;
  uint64_t m = 0;
  int digits = 0, exp10 = 0;
  i += neg;
  for (int frac = 0; i < n; i++) {
    if (p[i] == '.' && !frac) {
      frac = 1;
      continue;
    }
    if (p[i] < '0' || p[i] > '9') break;
    any = true;
    exp10 -= frac;
    if (!m && p[i] == '0') continue; /* a leading zero adds nothing */
    if (++digits > 17) return false;
    m = m * 10 + (uint64_t)(p[i] - '0');
  }
  if (!any) return false;
  if (i < n && (p[i] == 'e' || p[i] == 'E')) {
    bool eneg = ++i < n && p[i] == '-';
    if (i < n && (p[i] == '-' || p[i] == '+')) i++;
    int e = 0, edigits = 0;
    for (; i < n && p[i] >= '0' && p[i] <= '9' && edigits < 4; i++, edigits++) e = e * 10 + (p[i] - '0');
    if (!edigits) return false;
    exp10 += eneg ? -e : e;
  }
  if (i != n || m > ((uint64_t)1 << 53) || (m && (exp10 < -22 || exp10 > 22))) return false;
  double v = (double)m;
  if (m) v = exp10 >= 0 ? v * pow10[exp10] : v / pow10[-exp10];
  *out = neg ? -v : v;
  return true;
}

size_t rz_wire_number(const char *p, size_t len, double *out) {
  enum { SPAN_MAX = 39 }; /* a longer run of number characters is no number of a relay's */
  size_t n = 0;
  while (n < len && n < SPAN_MAX && number_char(p[n])) n++;
  if (!n || n == SPAN_MAX) return 0;
  if (exact_decimal(p, n, out)) return n;
  char buf[SPAN_MAX + 1];
  memcpy(buf, p, n);
  buf[n] = '\0';
  char *stop = NULL;
  double v = strtod(buf, &stop);
  if (stop != buf + n || !isfinite(v)) return 0;
  *out = v;
  return n;
}

/* A batch's numbers are mostly what relays write, short plain decimals ("12.345"): those are read
 * in one pass here; anything else (an exponent, a sign, more digits) by rz_wire_number. */
static bool take_num(cursor *c, double *out) {
  const char *p = c->p, *end = c->end;
  bool neg = p < end && *p == '-';
  p += neg;
  uint64_t m = 0;
  int digits = 0, frac = -1;
  for (; p < end && digits <= 15; p++) {
    if (*p >= '0' && *p <= '9') {
      m = m * 10 + (uint64_t)(*p - '0');
      digits++;
      frac += frac >= 0;
    } else if (*p == '.' && frac < 0) {
      frac = 0;
    } else {
      break;
    }
  }
  if (digits && digits <= 15 && frac != 0 && (p == end || !number_char(*p))) {
    /* at most 15 digits: m < 2^53, and one exact division (correctly rounded, as strtod) */
    static const double pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
    double v = frac > 0 ? (double)m / pow10[frac] : (double)m;
    *out = neg ? -v : v;
    c->p = p;
    return true;
  }
  size_t n = rz_wire_number(c->p, (size_t)(c->end - c->p), out);
  c->p += n;
  return n > 0;
}

/* A step's compute: one number, or the list of the period's samples (1 to FTL_WIRE_MAX_SAMPLES). */
static bool take_samples(cursor *c, rz_batch_entry *e) {
  if (!take(c, "[")) {
    if (!take_num(c, &e->compute_ms)) return false;
    e->samples[0] = e->compute_ms;
    e->nsamples = 1;
    return true;
  }
  do {
    if (e->nsamples == FTL_WIRE_MAX_SAMPLES || !take_num(c, &e->samples[e->nsamples])) return false;
    e->nsamples++;
  } while (take(c, ","));
  e->compute_ms = e->samples[e->nsamples - 1];
  return take(c, "]");
}

static bool take_state(cursor *c, char *out) {
  size_t n = 0;
  if (!take(c, "\"")) return false;
  while (c->p < c->end && n < 8 && (isalpha((unsigned char)*c->p) || *c->p == '?')) out[n++] = *c->p++;
  out[n] = '\0';
  return n > 0 && take(c, "\"");
}

/* One list ("step" or "alive") after its '[': entries to fn when fn is not NULL. */
static bool take_list(cursor *c, bool alive, void (*fn)(void *, const rz_batch_entry *), void *user) {
  if (take(c, "]")) return true;
  for (;;) {
    rz_batch_entry e = {.alive = alive};
    bool ok = take(c, "[") && take_int(c, &e.rank) && take(c, ",");
    if (ok && alive) ok = take_state(c, e.state) && take(c, ",") && take_int(c, &e.step);
    else if (ok) ok = take_int(c, &e.step) && take(c, ",") && take_samples(c, &e);
    /* A step's FLOPs, when the rank reports them: two more numbers, both or neither. */
    if (ok && !alive && take(c, ",")) {
      ok = take_num(c, &e.flops) && take(c, ",") && take_num(c, &e.flops_ms);
      e.has_flops = true;
    }
    if (!ok || !take(c, "]")) return false;
    if (fn) fn(user, &e);
    if (take(c, "]")) return true;
    if (!take(c, ",")) return false;
  }
}

static bool batch_pass(const char *line, size_t len, void (*fn)(void *, const rz_batch_entry *), void *user) {
  cursor c = {line, line + len};
  if (!take(&c, "{\"type\":\"batch\"")) return false;
  if (take(&c, ",\"step\":[") && !take_list(&c, false, fn, user)) return false;
  if (take(&c, ",\"alive\":[") && !take_list(&c, true, fn, user)) return false;
  return take(&c, "}") && c.p == c.end;
}

ftl_err rz_wire_batch_parse(const char *line, size_t len, void (*fn)(void *user, const rz_batch_entry *e), void *user) {
  if (!batch_pass(line, len, NULL, user)) return FTL_ERR_NOTFOUND;
  batch_pass(line, len, fn, user);
  return FTL_OK;
}

int64_t rz_wire_int(const json_t *msg, const char *key, int64_t fallback) {
  const json_t *v = json_object_get(msg, key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : fallback;
}

double rz_wire_num(const json_t *msg, const char *key, double fallback) {
  const json_t *v = json_object_get(msg, key);
  return json_is_number(v) ? json_number_value(v) : fallback;
}

const char *rz_wire_str(const json_t *msg, const char *key, const char *fallback) {
  const json_t *v = json_object_get(msg, key);
  return json_is_string(v) ? json_string_value(v) : fallback;
}
