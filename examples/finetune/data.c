/* examples/finetune/data.c: loading a data file and turning examples into sequences (data.h). */
#include "data.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "ftl/core.h"

#define FT_DATA_MAX_BYTES ((size_t)256 << 20)

int ft_data_load(const char *path, ft_data *d, char *msg, size_t msg_size) {
  memset(d, 0, sizeof *d);
  char *text = NULL;
  size_t size = 0;
  ftl_diag diag;
  if (ftl_read_file(path, FT_DATA_MAX_BYTES, &text, &size, &diag)) {
    snprintf(msg, msg_size, "%s", diag.msg);
    return -1;
  }
  int rc = ft_data_parse(text, size, path, d, msg, msg_size);
  ftl_free(text);
  return rc;
}

int ft_data_parse(const char *text, size_t size, const char *path, ft_data *d, char *msg, size_t msg_size) {
  memset(d, 0, sizeof *d);
  const char *nl = memchr(text, '\n', size);
  if (!nl || nl == text) {
    snprintf(msg, msg_size, "%s: the first line is empty or has no newline", path);
    return -1;
  }
  size_t len = (size_t)(nl - text);
  if (size % (len + 1) != 0 || len > 4000) {
    snprintf(msg, msg_size, "%s: lines must all be %zu bytes long (the first line's length)", path, len);
    return -1;
  }
  d->n = (int64_t)(size / (len + 1));
  d->len = (int)len;
  d->bytes = ftl_malloc((size_t)d->n * len);
  d->op_at = ftl_malloc((size_t)d->n * sizeof(int));
  if (!d->bytes || !d->op_at) {
    snprintf(msg, msg_size, "%s: out of memory", path);
    ft_data_free(d);
    return -1;
  }
  for (int64_t i = 0; i < d->n; i++) {
    const char *line = text + (size_t)i * (len + 1);
    if (line[len] != '\n') {
      snprintf(msg, msg_size, "%s:%lld: expected a line of %zu bytes", path, (long long)i + 1, len);
      ft_data_free(d);
      return -1;
    }
    int op = -1;
    for (size_t j = 0; j < len; j++) {
      unsigned char ch = (unsigned char)line[j];
      if (ch == '\n' || ch == '\0') op = -2;
      if (op == -1 && !(ch >= 'a' && ch <= 'z')) op = (int)j;
    }
    if (op < 1 || (size_t)op + 1 >= len) {
      snprintf(msg, msg_size, "%s:%lld: expected letters, an operator byte, then an answer", path, (long long)i + 1);
      ft_data_free(d);
      return -1;
    }
    memcpy(d->bytes + (size_t)i * len, line, len);
    d->op_at[i] = op;
  }
  d->hash = XXH3_64bits(text, size);
  return 0;
}

void ft_data_free(ft_data *d) {
  if (!d) return;
  ftl_free(d->bytes);
  ftl_free(d->op_at);
  d->bytes = NULL;
  d->op_at = NULL;
}

void ft_data_fill(const ft_data *d, const int32_t *idx, int count, int answer_only, int *tokens, int *targets) {
  int T = d->len + 1;
  for (int b = 0; b < count; b++) {
    const uint8_t *line = d->bytes + (size_t)idx[b] * (size_t)d->len;
    int *x = tokens + (size_t)b * T, *y = targets + (size_t)b * T;
    x[0] = '\n';
    for (int t = 0; t < d->len; t++)
      x[t + 1] = line[t];
    for (int t = 0; t < T; t++) {
      y[t] = t < d->len ? line[t] : '\n';
      if (answer_only && t <= d->op_at[idx[b]]) y[t] = -1;
    }
  }
}
