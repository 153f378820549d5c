/* launcher/hostfile.c: the strict hostfile reader behind launcher/hostfile.h.
 *
 * One pass over the lines; each is cut at its comment, trimmed, split at blanks into a host and
 * options. Every refusal names the file, the line and the text at fault, quoted with escapes so a
 * binary file cannot garble the terminal. Duplicate hosts are refused too: Open MPI would add their
 * slots up, but ftl leaves a failed host out of later attempts by its line, and one host on two
 * lines would then be half left out. */
#include "launcher/hostfile.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ftl/core.h"

/* How much of a bad piece of text a message quotes. */
#define QUOTE_MAX 60

/* text (len bytes) for a message: control and non-ASCII bytes as \xNN, cut after QUOTE_MAX. */
static void quote(const char *text, size_t len, char *out, size_t size) {
  size_t o = 0;
  for (size_t i = 0; i < len && o + 8 < size; i++) {
    unsigned char ch = (unsigned char)text[i];
    if (i == QUOTE_MAX) {
      memcpy(out + o, "...", 3);
      o += 3;
      break;
    }
    if (ch == '\'' || ch == '\\') {
      out[o++] = '\\';
      out[o++] = (char)ch;
    } else if (ch < 0x20 || ch >= 0x7F) {
      o += (size_t)snprintf(out + o, size - o, "\\x%02x", ch);
    } else {
      out[o++] = (char)ch;
    }
  }
  out[o] = '\0';
}

static bool is_blank(char ch) { return ch == ' ' || ch == '\t'; }
static bool is_alnum(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* A DNS name, an IPv4 address or an IPv6 address: letters, digits, '.', '-', '_' and ':', starting
 * with a letter, a digit or ':' (as in ::1). */
static bool host_ok(const char *s, size_t len) {
  if (len == 0 || len > FTL_HOSTFILE_NAME_MAX || !(is_alnum(s[0]) || s[0] == ':')) return false;
  for (size_t i = 0; i < len; i++)
    if (!(is_alnum(s[i]) || s[i] == '.' || s[i] == '-' || s[i] == '_' || s[i] == ':')) return false;
  return true;
}

/* "slots=N" / "max_slots=N" into *out (1..FTL_HOSTFILE_SLOTS_MAX); the message names the option. */
static ftl_err parse_count(const char *file, int line_no, const char *word, size_t word_len, size_t key_len, int *out,
                           ftl_diag *d) {
  char num[24], quoted[4 * QUOTE_MAX + 8];
  int64_t v = 0;
  size_t n = word_len - key_len - 1;
  if (n == 0 || n >= sizeof num) goto bad;
  memcpy(num, word + key_len + 1, n);
  num[n] = '\0';
  if (num[0] < '0' || num[0] > '9' || ftl_parse_i64(num, 1, FTL_HOSTFILE_SLOTS_MAX, &v) != FTL_OK) goto bad;
  *out = (int)v;
  return FTL_OK;
bad:
  quote(word, word_len, quoted, sizeof quoted);
  return ftl_diag_fail(d, FTL_ERR_SPEC, "hostfile %s:%d: %.*s: expected an integer from 1 to %d, got '%s'", file,
                       line_no, (int)key_len, word, FTL_HOSTFILE_SLOTS_MAX, quoted);
}

/* One line, cut at its comment and trimmed (len > 0), into h. */
static ftl_err parse_host_line(const char *file, int line_no, const char *s, size_t len, ln_hostfile_host *h,
                               ftl_diag *d) {
  char quoted[4 * QUOTE_MAX + 8];
  memset(h, 0, sizeof *h);
  h->line_no = line_no;
  h->slots = 1;
  memcpy(h->line, s, len);
  h->line[len] = '\0';
  bool have_slots = false, have_max = false;
  size_t i = 0;
  for (int word_no = 0; i < len; word_no++) {
    size_t start = i;
    while (i < len && !is_blank(s[i])) i++;
    const char *w = s + start;
    size_t wlen = i - start;
    while (i < len && is_blank(s[i])) i++;
    if (word_no == 0) {
      if (!host_ok(w, wlen)) {
        quote(w, wlen, quoted, sizeof quoted);
        return ftl_diag_fail(d, FTL_ERR_SPEC,
                             "hostfile %s:%d: expected a host name or address (then slots=N, max_slots=N), got '%s'",
                             file, line_no, quoted);
      }
      memcpy(h->name, w, wlen);
      h->name[wlen] = '\0';
      continue;
    }
    bool is_slots = wlen > 6 && !strncmp(w, "slots=", 6);
    bool is_max = wlen > 10 && !strncmp(w, "max_slots=", 10);
    if ((is_slots && have_slots) || (is_max && have_max)) {
      quote(w, wlen, quoted, sizeof quoted);
      return ftl_diag_fail(d, FTL_ERR_SPEC, "hostfile %s:%d: '%s' given twice for host %s", file, line_no, quoted,
                           h->name);
    }
    ftl_err rc;
    if (is_slots) {
      have_slots = true;
      rc = parse_count(file, line_no, w, wlen, 5, &h->slots, d);
    } else if (is_max) {
      have_max = true;
      rc = parse_count(file, line_no, w, wlen, 9, &h->max_slots, d);
    } else {
      quote(w, wlen, quoted, sizeof quoted);
      rc = ftl_diag_fail(d, FTL_ERR_SPEC, "hostfile %s:%d: unknown option '%s' (expected slots=N or max_slots=N)",
                         file, line_no, quoted);
    }
    if (rc) return rc;
  }
  if (have_max && h->max_slots < h->slots)
    return ftl_diag_fail(d, FTL_ERR_SPEC, "hostfile %s:%d: max_slots=%d is less than slots=%d for host %s", file,
                         line_no, h->max_slots, h->slots, h->name);
  return FTL_OK;
}

ftl_err ln_hostfile_parse(const char *data, size_t size, const char *file, ln_hostfile_host **hosts_out,
                           size_t *count_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ln_hostfile_host *hosts = NULL;
  size_t count = 0, cap = 0;
  char quoted[4 * QUOTE_MAX + 8];
  *hosts_out = NULL;
  *count_out = 0;
  if (!file) file = "<hostfile>";
  if (size > FTL_HOSTFILE_MAX_BYTES) {
    rc = ftl_diag_fail(d, FTL_ERR_SPEC, "hostfile %s: too large (the limit is %zu bytes)", file,
                       FTL_HOSTFILE_MAX_BYTES);
    goto out;
  }
  int line_no = 0;
  for (size_t pos = 0; pos < size;) {
    line_no++;
    const char *line = data + pos;
    const char *nl = memchr(line, '\n', size - pos);
    size_t len = nl ? (size_t)(nl - line) : size - pos;
    pos += len + (nl != NULL);
    if (len > 0 && line[len - 1] == '\r') len--; /* written on Windows */
    if (len > FTL_HOSTFILE_LINE_MAX) {
      quote(line, len, quoted, sizeof quoted);
      rc = ftl_diag_fail(d, FTL_ERR_SPEC, "hostfile %s:%d: line longer than %d bytes: '%s'", file, line_no,
                         FTL_HOSTFILE_LINE_MAX, quoted);
      goto out;
    }
    for (size_t i = 0; i < len; i++) {
      unsigned char ch = (unsigned char)line[i];
      if ((ch < 0x20 && ch != '\t') || ch == 0x7F) {
        quote(line, len, quoted, sizeof quoted);
        rc = ftl_diag_fail(d, FTL_ERR_SPEC, "hostfile %s:%d: control character (byte 0x%02x) in '%s'; a hostfile is text",
                           file, line_no, ch, quoted);
        goto out;
      }
    }
    const char *hash = memchr(line, '#', len);
    if (hash) len = (size_t)(hash - line);
    while (len > 0 && is_blank(line[0])) line++, len--;
    while (len > 0 && is_blank(line[len - 1])) len--;
    if (len == 0) continue;
    if (count == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      ln_hostfile_host *grown = ftl_realloc(hosts, ncap * sizeof *grown);
      if (!grown) {
        rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "hostfile %s: out of memory", file);
        goto out;
      }
      hosts = grown;
      cap = ncap;
    }
    ln_hostfile_host *h = &hosts[count];
    if ((rc = parse_host_line(file, line_no, line, len, h, d))) goto out;
    /* A host list is short (a few thousand at most), so a linear look for a repeat is enough. */
    for (size_t j = 0; j < count; j++) {
      if (!strcmp(hosts[j].name, h->name)) {
        rc = ftl_diag_fail(d, FTL_ERR_SPEC, "hostfile %s:%d: host %s is already on line %d; give each host once with all its slots",
                           file, line_no, h->name, hosts[j].line_no);
        goto out;
      }
    }
    count++;
  }
  if (count == 0) {
    rc = ftl_diag_fail(d, FTL_ERR_SPEC,
                       "hostfile %s: names no host (%s); expected lines like 'node1 slots=8'", file,
                       size == 0 ? "the file is empty" : "only blank lines and comments");
    goto out;
  }
  *hosts_out = hosts;
  *count_out = count;
  hosts = NULL;
out:
  ftl_free(hosts);
  return rc;
}

ftl_err ln_hostfile_read(const char *path, ln_hostfile_host **hosts_out, size_t *count_out, ftl_diag *d) {
  char *data = NULL;
  size_t size = 0;
  ftl_diag read_diag = {{0}};
  *hosts_out = NULL;
  *count_out = 0;
  ftl_err rc = ftl_read_file(path, FTL_HOSTFILE_MAX_BYTES + 1, &data, &size, &read_diag);
  if (rc == FTL_ERR_NOTFOUND || rc == FTL_ERR_IO) {
    int err = errno; /* ftl_read_file returns straight after the failing call (see jobspec.c) */
    rc = ftl_diag_fail(d, rc, "cannot read hostfile %s: %s", path, err ? strerror(err) : read_diag.msg);
  } else if (rc == FTL_ERR_RANGE) {
    rc = ftl_diag_fail(d, FTL_ERR_SPEC, "hostfile %s: too large (the limit is %zu bytes)", path, FTL_HOSTFILE_MAX_BYTES);
  } else if (rc) {
    rc = ftl_diag_fail(d, rc, "%s", read_diag.msg);
  } else {
    rc = ln_hostfile_parse(data, size, path, hosts_out, count_out, d);
  }
  ftl_free(data);
  return rc;
}

int ln_hostfile_total_slots(const ln_hostfile_host *hosts, size_t count) {
  int64_t total = 0;
  for (size_t i = 0; i < count; i++) {
    total += hosts[i].slots;
    if (total > INT_MAX) return INT_MAX;
  }
  return (int)total;
}

void ln_hostfile_quote(const char *text, size_t len, char *out, size_t size) { quote(text, len, out, size); }
