/* examples/finetune/data.h: the example's data sets and how examples become token sequences.
 *
 * A data file is text, one example per line, every line the same length (docs/finetune.md):
 * a prompt of lowercase letters, one operator byte, then the answer ("abcdefgh>bcdefghi").
 * Example i becomes the byte sequence '\n' + line, predicting line + '\n'; positions are scored
 * either all (pre-training: a language model of the whole line) or only after the operator
 * (fine-tuning and evaluation: the answer and the closing newline).
 *
 * What is not here: generating the files (gen_data.c), choosing which examples a step uses
 * (state.h's data order). */
#ifndef FTL_EXAMPLES_FINETUNE_DATA_H
#define FTL_EXAMPLES_FINETUNE_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct ft_data {
  int64_t n;      /* examples */
  int len;        /* bytes of a line without its newline */
  uint8_t *bytes; /* n * len */
  int *op_at;     /* per example: index of the operator byte in its line */
  uint64_t hash;  /* XXH3-64 of the file's bytes: names the data in the adapter's metadata */
} ft_data;

/* Reads and checks a data file. 0 on success; otherwise -1 and one sentence in msg. */
int ft_data_load(const char *path, ft_data *d, char *msg, size_t msg_size);
/* The same from the file's bytes (path only names it in messages). Exposed for the fuzz target. */
int ft_data_parse(const char *text, size_t size, const char *path, ft_data *d, char *msg, size_t msg_size);
void ft_data_free(ft_data *d);

/* Tokens per sequence: len + 1. */
static inline int ft_data_seq_len(const ft_data *d) { return d->len + 1; }

/* Fills tokens/targets [count, len + 1] for the examples idx[0..count). answer_only: score only
 * the positions after the operator. */
void ft_data_fill(const ft_data *d, const int32_t *idx, int count, int answer_only, int *tokens, int *targets);

#endif
