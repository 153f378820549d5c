/* examples/finetune/model.c: the Llama decoder's numerics on the CPU (see model.h).
 *
 * Map: random numbers; configuration, parameters and the adapter (allocation, Hugging Face's
 * names, initialisation); small vector kernels; RMSNorm, linear (+ LoRA), rotary embedding,
 * attention, SwiGLU, cross-entropy, forward and backward of each; the whole forward and backward
 * passes; AdamW.
 *
 * The layer kernels follow llm.c's train_gpt2.c in spirit (one plain loop nest per operation,
 * activations kept for the backward pass) but q, k and v are separate projections so that each
 * can carry its own adapter. Dot products use eight partial sums in a fixed order: the compiler
 * can vectorize them (float addition is not associative, so a single running sum would stay
 * scalar) and the result is still the same on every run. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ftl/core.h"

/* ---- random numbers ------------------------------------------------------------------------ */

float ft_rng_uniform(ft_rng *r) { return (float)(ft_rng_next(r) >> 40) / 16777216.0f; }

uint64_t ft_rng_below(ft_rng *r, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* reject the short last bucket */
  for (;;) {
    uint64_t x = ft_rng_next(r);
    if (x < limit) return x % n;
  }
}

float ft_rng_normal(ft_rng *r) {
  /* Box-Muller; u1 in (0, 1] so the log is finite. */
  float u1 = 1.0f - ft_rng_uniform(r), u2 = ft_rng_uniform(r);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* ---- configuration, parameters, adapter ---------------------------------------------------- */

static const char *const lin_names[FT_LIN_COUNT] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                    "gate_proj", "up_proj", "down_proj"};
static const char *const lin_paths[FT_LIN_COUNT] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                    "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                                    "mlp.down_proj"};

const char *ft_lin_name(ft_lin lin) { return (unsigned)lin < FT_LIN_COUNT ? lin_names[lin] : "?"; }
const char *ft_lin_path(ft_lin lin) { return (unsigned)lin < FT_LIN_COUNT ? lin_paths[lin] : "?"; }

int ft_lin_in(const ft_config *c, ft_lin lin) { return lin == FT_LIN_DOWN ? c->intermediate : c->embd; }
int ft_lin_out(const ft_config *c, ft_lin lin) {
  return lin == FT_LIN_GATE || lin == FT_LIN_UP ? c->intermediate : c->embd;
}

int ft_default_intermediate(int embd) { return (8 * embd / 3 + 7) / 8 * 8; }

void ft_config_resolve(ft_config *c) {
  if (c->intermediate == 0) c->intermediate = ft_default_intermediate(c->embd);
  if (c->kv_heads == 0) c->kv_heads = c->heads;
  if (c->rms_eps == 0) c->rms_eps = FT_DEFAULT_RMS_EPS;
  if (c->rope_theta == 0) c->rope_theta = FT_DEFAULT_ROPE_THETA;
}

int ft_config_equal(const ft_config *a, const ft_config *b) {
  ft_config x = *a, y = *b;
  ft_config_resolve(&x);
  ft_config_resolve(&y);
  return x.block == y.block && x.layers == y.layers && x.heads == y.heads && x.embd == y.embd &&
         x.intermediate == y.intermediate && x.kv_heads == y.kv_heads && x.rms_eps == y.rms_eps &&
         x.rope_theta == y.rope_theta;
}

int ft_config_check(const ft_config *c, char *msg, size_t msg_size) {
  const char *why = NULL;
  if (c->block < 2 || c->block > 4096)
    why = "block must be 2..4096";
  else if (c->layers < 1 || c->layers > FT_MAX_LAYERS)
    why = "layers must be 1..16";
  else if (c->heads < 1 || c->embd < 1 || c->embd > 4096 || c->embd % c->heads || (c->embd / c->heads) % 2)
    why = "embd must be 1..4096 and a multiple of heads with an even head size";
  else if (c->kv_heads != c->heads)
    why = "num_key_value_heads must equal heads (no grouped-query attention)";
  else if (c->intermediate < 1 || c->intermediate > 16384)
    why = "intermediate must be 1..16384";
  else if (!(c->rms_eps > 0 && c->rms_eps < 1))
    why = "rms_norm_eps must be in (0, 1)";
  else if (!(c->rope_theta > 1 && c->rope_theta < 1e12))
    why = "rope_theta must be in (1, 1e12)";
  if (why && msg) snprintf(msg, msg_size, "model configuration: %s", why);
  return why != NULL;
}

/* Lays out named views over one flat array: a first pass counts (base == NULL), the second
 * assigns pointers. */
typedef struct layout {
  float *base;
  size_t used;
  ft_tensor *tensors;
  int n;
} layout;

static float *take(layout *l, const char *name, int ndim, int64_t d0, int64_t d1) {
  size_t count = (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
  float *p = l->base ? l->base + l->used : NULL;
  if (l->tensors) {
    ft_tensor *t = &l->tensors[l->n];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = ndim == 2 ? d1 : 0;
    t->data = p;
    t->count = count;
  }
  l->n++;
  l->used += count;
  return p;
}

static void params_layout(ft_params *p, layout *l) {
  const ft_config *c = &p->cfg;
  int C = c->embd;
  char name[FT_NAME_MAX];
  p->embed = take(l, "model.embed_tokens.weight", 2, FT_VOCAB, C);
  for (int i = 0; i < c->layers; i++) {
    ft_block *b = &p->layer[i];
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", i);
    b->attn_norm = take(l, name, 1, C, 0);
    for (int k = 0; k < FT_LIN_COUNT; k++) {
      if (k == FT_LIN_GATE) {
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", i);
        b->mlp_norm = take(l, name, 1, C, 0);
      }
      snprintf(name, sizeof name, "model.layers.%d.%s.weight", i, lin_paths[k]);
      b->w[k] = take(l, name, 2, ft_lin_out(c, (ft_lin)k), ft_lin_in(c, (ft_lin)k));
    }
  }
  p->norm = take(l, "model.norm.weight", 1, C, 0);
}

int ft_params_create(ft_params *p, const ft_config *cfg) {
  memset(p, 0, sizeof *p);
  p->cfg = *cfg;
  ft_config_resolve(&p->cfg);
  layout l = {0};
  params_layout(p, &l);
  p->count = l.used;
  p->n_tensors = l.n;
  p->mem = ftl_calloc(p->count + 1, sizeof(float));
  p->tensors = ftl_calloc((size_t)p->n_tensors, sizeof(ft_tensor));
  if (!p->mem || !p->tensors) {
    ft_params_destroy(p);
    return -1;
  }
  layout l2 = {.base = p->mem, .tensors = p->tensors};
  params_layout(p, &l2);
  return 0;
}

void ft_params_destroy(ft_params *p) {
  if (!p) return;
  ftl_free(p->mem);
  ftl_free(p->tensors);
  p->mem = NULL;
  p->tensors = NULL;
}

static void fill_normal(ft_rng *r, float *x, size_t n, float std) {
  for (size_t i = 0; i < n; i++)
    x[i] = std * ft_rng_normal(r);
}

void ft_params_init(ft_params *p, uint64_t seed) {
  ft_rng r;
  ft_rng_seed(&r, seed);
  const ft_config *c = &p->cfg;
  int C = c->embd;
  memset(p->mem, 0, p->count * sizeof(float));
  fill_normal(&r, p->embed, (size_t)FT_VOCAB * C, 0.02f);
  float resid_std = 0.02f / sqrtf(2.0f * (float)c->layers);
  for (int i = 0; i < c->layers; i++) {
    ft_block *b = &p->layer[i];
    for (int k = 0; k < C; k++)
      b->attn_norm[k] = b->mlp_norm[k] = 1.0f;
    for (int k = 0; k < FT_LIN_COUNT; k++) {
      float std = (k == FT_LIN_O || k == FT_LIN_DOWN) ? resid_std : 0.02f;
      fill_normal(&r, b->w[k], (size_t)ft_lin_out(c, (ft_lin)k) * (size_t)ft_lin_in(c, (ft_lin)k), std);
    }
  }
  for (int k = 0; k < C; k++)
    p->norm[k] = 1.0f;
}

static void lora_layout(ft_lora *a, layout *l) {
  char name[FT_NAME_MAX];
  for (int i = 0; i < a->cfg.layers; i++) {
    for (int k = 0; k < FT_LIN_COUNT; k++) {
      if (!(a->targets & (1u << k))) continue;
      snprintf(name, sizeof name, "model.layers.%d.%s.lora_A.weight", i, lin_paths[k]);
      a->A[i][k] = take(l, name, 2, a->rank, ft_lin_in(&a->cfg, (ft_lin)k));
      snprintf(name, sizeof name, "model.layers.%d.%s.lora_B.weight", i, lin_paths[k]);
      a->B[i][k] = take(l, name, 2, ft_lin_out(&a->cfg, (ft_lin)k), a->rank);
    }
  }
}

int ft_lora_create(ft_lora *a, const ft_config *cfg, int rank, float alpha, unsigned targets) {
  memset(a, 0, sizeof *a);
  a->cfg = *cfg;
  ft_config_resolve(&a->cfg);
  a->rank = rank;
  a->alpha = alpha;
  a->targets = targets & ((1u << FT_LIN_COUNT) - 1);
  if (rank < 1 || !a->targets) return -1;
  layout l = {0};
  lora_layout(a, &l);
  a->count = l.used;
  a->n_tensors = l.n;
  /* Two spare floats after the parameters: the training step sums its loss and its stop vote
   * there, in the same allreduce as the gradients. */
  a->mem = ftl_calloc(a->count + 2, sizeof(float));
  a->tensors = ftl_calloc((size_t)a->n_tensors, sizeof(ft_tensor));
  if (!a->mem || !a->tensors) {
    ft_lora_destroy(a);
    return -1;
  }
  layout l2 = {.base = a->mem, .tensors = a->tensors};
  lora_layout(a, &l2);
  return 0;
}

void ft_lora_destroy(ft_lora *a) {
  if (!a) return;
  ftl_free(a->mem);
  ftl_free(a->tensors);
  a->mem = NULL;
  a->tensors = NULL;
}

void ft_lora_init(ft_lora *a, uint64_t seed) {
  ft_rng r;
  ft_rng_seed(&r, seed);
  memset(a->mem, 0, a->count * sizeof(float));
  for (int i = 0; i < a->cfg.layers; i++) {
    for (int k = 0; k < FT_LIN_COUNT; k++) {
      if (!a->A[i][k]) continue;
      int in = ft_lin_in(&a->cfg, (ft_lin)k);
      float bound = 1.0f / sqrtf((float)in);
      for (size_t j = 0; j < (size_t)a->rank * (size_t)in; j++)
        a->A[i][k][j] = bound * (2.0f * ft_rng_uniform(&r) - 1.0f);
    }
  }
}

float ft_lora_scale(const ft_lora *a) { return a->alpha / (float)a->rank; }

unsigned ft_lora_parse_targets(const char *list) {
  unsigned bits = 0;
  const char *s = list;
  while (*s) {
    size_t n = strcspn(s, ",");
    int found = -1;
    for (int k = 0; k < FT_LIN_COUNT; k++)
      if (strlen(lin_names[k]) == n && strncmp(s, lin_names[k], n) == 0) found = k;
    if (found < 0 || n == 0) return 0;
    bits |= 1u << found;
    s += n;
    if (*s == ',') s++;
  }
  return bits;
}

void ft_lora_format_targets(unsigned targets, char *buf, size_t size) {
  size_t used = 0;
  if (size) buf[0] = '\0';
  for (int k = 0; k < FT_LIN_COUNT; k++) {
    if (!(targets & (1u << k))) continue;
    int n = snprintf(buf + used, size > used ? size - used : 0, "%s%s", used ? "," : "", lin_names[k]);
    if (n > 0) used += (size_t)n;
  }
}

/* ---- vector kernels ------------------------------------------------------------------------ */

static float dot(const float *restrict a, const float *restrict b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++)
      acc[k] += a[i + k] * b[i + k];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; i++)
    s += a[i] * b[i];
  return s;
}

/* y += alpha * x */
static void axpy(float *restrict y, float alpha, const float *restrict x, int n) {
  for (int i = 0; i < n; i++)
    y[i] += alpha * x[i];
}

/* ---- layers -------------------------------------------------------------------------------- */

/* Hugging Face's LlamaRMSNorm in float32: out = w * (x * rsqrt(mean(x^2) + eps)); rstd keeps the
 * row's rsqrt for the backward pass. */
static void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, float eps, int N, int C) {
  for (int t = 0; t < N; t++) {
    const float *x = inp + (size_t)t * C;
    float ss = dot(x, x, C) / (float)C;
    float s = 1.0f / sqrtf(ss + eps);
    float *o = out + (size_t)t * C;
    for (int i = 0; i < C; i++)
      o[i] = w[i] * (x[i] * s);
    rstd[t] = s;
  }
}

/* y_i = w_i x_i s with s = (mean(x^2) + eps)^-1/2, so dx_i = s w_i dy_i - s^3 x_i mean_j(w_j dy_j x_j)
 * and dw_i = x_i s dy_i. Adds to dinp (and dw where not NULL). */
static void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                             const float *rstd, int N, int C) {
  for (int t = 0; t < N; t++) {
    const float *dy = dout + (size_t)t * C, *x = inp + (size_t)t * C;
    float *dx = dinp + (size_t)t * C;
    float s = rstd[t], m = 0.0f;
    for (int i = 0; i < C; i++)
      m += w[i] * dy[i] * x[i];
    m /= (float)C;
    float s3m = s * s * s * m;
    for (int i = 0; i < C; i++) {
      if (dw) dw[i] += x[i] * s * dy[i];
      dx[i] += s * w[i] * dy[i] - s3m * x[i];
    }
  }
}

/* One linear layer (no bias) with its optional adapter: out = inp W^T + scale * (inp A^T) B^T.
 * u [N, r] keeps inp A^T for the backward pass. */
typedef struct lin_args {
  const float *w;     /* [OC, IC] */
  const float *A, *B; /* [r, IC], [OC, r]; NULL without an adapter */
  int r;
  float scale;
  int IC, OC;
} lin_args;

static void linear_forward(float *out, float *u, const float *inp, const lin_args *a, int N) {
  for (int t = 0; t < N; t++) {
    const float *x = inp + (size_t)t * a->IC;
    float *y = out + (size_t)t * a->OC;
    for (int o = 0; o < a->OC; o++)
      y[o] = dot(x, a->w + (size_t)o * a->IC, a->IC);
    if (a->A) {
      float *ut = u + (size_t)t * a->r;
      for (int j = 0; j < a->r; j++)
        ut[j] = dot(x, a->A + (size_t)j * a->IC, a->IC);
      for (int o = 0; o < a->OC; o++)
        y[o] += a->scale * dot(a->B + (size_t)o * a->r, ut, a->r);
    }
  }
}

/* Adds to dinp, and to dw/dA/dB where not NULL. du is scratch [r]. */
static void linear_backward(float *dinp, float *dw, float *dA, float *dB, float *du, const float *dout,
                            const float *inp, const float *u, const lin_args *a, int N) {
  for (int t = 0; t < N; t++) {
    const float *dy = dout + (size_t)t * a->OC, *x = inp + (size_t)t * a->IC;
    float *dx = dinp + (size_t)t * a->IC;
    for (int o = 0; o < a->OC; o++) {
      float g = dy[o];
      if (g == 0.0f) continue; /* exact: adding 0 * w changes nothing */
      axpy(dx, g, a->w + (size_t)o * a->IC, a->IC);
      if (dw) axpy(dw + (size_t)o * a->IC, g, x, a->IC);
    }
    if (a->A) {
      const float *ut = u + (size_t)t * a->r;
      for (int j = 0; j < a->r; j++)
        du[j] = 0.0f;
      for (int o = 0; o < a->OC; o++) {
        float g = a->scale * dy[o];
        if (g == 0.0f) continue;
        axpy(du, g, a->B + (size_t)o * a->r, a->r);
        if (dB) axpy(dB + (size_t)o * a->r, g, ut, a->r);
      }
      for (int j = 0; j < a->r; j++) {
        axpy(dx, du[j], a->A + (size_t)j * a->IC, a->IC);
        if (dA) axpy(dA + (size_t)j * a->IC, du[j], x, a->IC);
      }
    }
  }
}

void ft_rope_table(const ft_config *c, int T, float *cos_out, float *sin_out) {
  int hs = c->embd / c->heads, half = hs / 2;
  float theta = (float)c->rope_theta;
  for (int i = 0; i < half; i++) {
    /* transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), then pos * inv_freq. */
    float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)hs);
    for (int t = 0; t < T; t++) {
      float ang = (float)t * inv_freq;
      cos_out[(size_t)t * half + i] = cosf(ang);
      sin_out[(size_t)t * half + i] = sinf(ang);
    }
  }
}

/* Rotary embedding in place on x [B, T, C], every head: x' = x cos + rotate_half(x) sin with
 * rotate_half(x) = cat(-x[h/2:], x[:h/2]) (Hugging Face's non-interleaved halves). dir -1 applies
 * the inverse rotation (sin negated): the backward pass, since a rotation's transpose is its
 * inverse. */
static void rope_apply(float *x, const float *cosv, const float *sinv, int B, int T, int C, int H, float dir) {
  int hs = C / H, half = hs / 2;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int h = 0; h < H; h++) {
        float *v = x + ((size_t)b * T + t) * C + h * hs;
        const float *cs = cosv + (size_t)t * half, *sn = sinv + (size_t)t * half;
        for (int i = 0; i < half; i++) {
          float x1 = v[i], x2 = v[i + half], c = cs[i], s = dir * sn[i];
          v[i] = x1 * c - x2 * s;
          v[i + half] = x2 * c + x1 * s;
        }
      }
}

/* Causal self-attention over separate q, k, v [B, T, C] (q and k rotated); att [B, H, T, T] keeps
 * the softmax. */
static void attention_forward(float *out, float *att, const float *q, const float *k, const float *v, int B, int T,
                              int C, int H) {
  int hs = C / H;
  float scale = 1.0f / sqrtf((float)hs);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int h = 0; h < H; h++) {
        const float *qt = q + ((size_t)b * T + t) * C + h * hs;
        float *a = att + (((size_t)b * H + h) * T + t) * T;
        float maxv = -INFINITY;
        for (int t2 = 0; t2 <= t; t2++) {
          a[t2] = scale * dot(qt, k + ((size_t)b * T + t2) * C + h * hs, hs);
          if (a[t2] > maxv) maxv = a[t2];
        }
        float sum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
          a[t2] = expf(a[t2] - maxv);
          sum += a[t2];
        }
        float inv = 1.0f / sum;
        for (int t2 = 0; t2 < T; t2++)
          a[t2] = t2 <= t ? a[t2] * inv : 0.0f;
        float *o = out + ((size_t)b * T + t) * C + h * hs;
        for (int i = 0; i < hs; i++)
          o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++)
          axpy(o, a[t2], v + ((size_t)b * T + t2) * C + h * hs, hs);
      }
}

/* datt is scratch [T]. Adds to dq, dk, dv. */
static void attention_backward(float *dq, float *dk, float *dv, float *datt, const float *dout, const float *q,
                               const float *k, const float *v, const float *att, int B, int T, int C, int H) {
  int hs = C / H;
  float scale = 1.0f / sqrtf((float)hs);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int h = 0; h < H; h++) {
        const float *a = att + (((size_t)b * H + h) * T + t) * T;
        const float *dot_ = dout + ((size_t)b * T + t) * C + h * hs;
        const float *qt = q + ((size_t)b * T + t) * C + h * hs;
        float *dqt = dq + ((size_t)b * T + t) * C + h * hs;
        float s = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
          size_t off = ((size_t)b * T + t2) * C + h * hs;
          datt[t2] = dot(dot_, v + off, hs);
          axpy(dv + off, a[t2], dot_, hs);
          s += a[t2] * datt[t2];
        }
        for (int t2 = 0; t2 <= t; t2++) {
          size_t off = ((size_t)b * T + t2) * C + h * hs;
          float dpre = a[t2] * (datt[t2] - s) * scale;
          axpy(dqt, dpre, k + off, hs);
          axpy(dk + off, dpre, qt, hs);
        }
      }
}

/* The SwiGLU MLP's middle: m = silu(g) * u with silu(g) = g sigmoid(g) (transformers' "silu"). */
static void swiglu_forward(float *m, const float *g, const float *u, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float x = g[i];
    m[i] = (x / (1.0f + expf(-x))) * u[i];
  }
}

/* dg = dm u silu'(g), silu'(g) = s (1 + g (1 - s)) with s = sigmoid(g); du = dm silu(g). Written,
 * not added. */
static void swiglu_backward(float *dg, float *du, const float *dm, const float *g, const float *u, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float x = g[i], s = 1.0f / (1.0f + expf(-x));
    dg[i] = dm[i] * u[i] * (s * (1.0f + x * (1.0f - s)));
    du[i] = dm[i] * (x * s);
  }
}

/* ---- activations --------------------------------------------------------------------------- */

typedef struct layer_acts {
  float *in; /* residual stream entering the layer [N, C] */
  float *n1, *n1_rstd; /* input_layernorm's output and its row factors */
  float *q, *k, *v, *att, *atty; /* q and k after the rotary embedding */
  float *res2, *n2, *n2_rstd; /* the residual after attention; post_attention_layernorm */
  float *g, *up, *m;          /* gate_proj and up_proj outputs [N, I]; silu(g) * up */
  float *u[FT_LIN_COUNT];     /* adapter intermediates [N, r] */
} layer_acts;

struct ft_acts {
  ft_config cfg;
  int r, max_b, b, t;
  layer_acts l[FT_MAX_LAYERS];
  float *rope_cos, *rope_sin;        /* [block, head/2] */
  float *out;                        /* residual after the last layer [N, C] */
  float *nf, *nf_rstd, *logits;      /* model.norm; logits hold probabilities after a scored pass */
  int *tokens, *targets;
  int targets_given;
  /* gradient scratch */
  float *d_res, *d_res2, *d_a, *d_b, *d_q, *d_k, *d_v, *d_m, *d_g, *d_up, *scratch;
  float *pool;
  size_t pool_used, pool_size;
};

static float *pool_take(ft_acts *a, size_t n) {
  float *p = a->pool ? a->pool + a->pool_used : NULL;
  a->pool_used += n;
  return p;
}

static void acts_layout(ft_acts *a) {
  const ft_config *c = &a->cfg;
  size_t N = (size_t)a->max_b * c->block, C = c->embd, T = c->block, H = c->heads, I = c->intermediate;
  a->pool_used = 0;
  for (int i = 0; i < c->layers; i++) {
    layer_acts *l = &a->l[i];
    l->in = pool_take(a, N * C);
    l->n1 = pool_take(a, N * C);
    l->n1_rstd = pool_take(a, N);
    l->q = pool_take(a, N * C);
    l->k = pool_take(a, N * C);
    l->v = pool_take(a, N * C);
    l->att = pool_take(a, (size_t)a->max_b * H * T * T);
    l->atty = pool_take(a, N * C);
    l->res2 = pool_take(a, N * C);
    l->n2 = pool_take(a, N * C);
    l->n2_rstd = pool_take(a, N);
    l->g = pool_take(a, N * I);
    l->up = pool_take(a, N * I);
    l->m = pool_take(a, N * I);
    for (int k = 0; k < FT_LIN_COUNT; k++)
      l->u[k] = a->r ? pool_take(a, N * (size_t)a->r) : NULL;
  }
  a->rope_cos = pool_take(a, T * (C / H / 2));
  a->rope_sin = pool_take(a, T * (C / H / 2));
  a->out = pool_take(a, N * C);
  a->nf = pool_take(a, N * C);
  a->nf_rstd = pool_take(a, N);
  a->logits = pool_take(a, N * FT_VOCAB);
  a->d_res = pool_take(a, N * C);
  a->d_res2 = pool_take(a, N * C);
  a->d_a = pool_take(a, N * C);
  a->d_b = pool_take(a, N * C);
  a->d_q = pool_take(a, N * C);
  a->d_k = pool_take(a, N * C);
  a->d_v = pool_take(a, N * C);
  a->d_m = pool_take(a, N * I);
  a->d_g = pool_take(a, N * I);
  a->d_up = pool_take(a, N * I);
  a->scratch = pool_take(a, T + (size_t)a->r + 1);
}

ft_acts *ft_acts_create(const ft_config *cfg, int lora_rank, int max_b) {
  ft_acts *a = ftl_calloc(1, sizeof *a);
  if (!a) return NULL;
  a->cfg = *cfg;
  ft_config_resolve(&a->cfg);
  a->r = lora_rank > 0 ? lora_rank : 0;
  a->max_b = max_b > 0 ? max_b : 1;
  acts_layout(a);
  a->pool_size = a->pool_used;
  a->pool = ftl_calloc(a->pool_size, sizeof(float));
  size_t N = (size_t)a->max_b * a->cfg.block;
  a->tokens = ftl_calloc(N, sizeof(int));
  a->targets = ftl_calloc(N, sizeof(int));
  if (!a->pool || !a->tokens || !a->targets) {
    ft_acts_destroy(a);
    return NULL;
  }
  acts_layout(a);
  ft_rope_table(&a->cfg, a->cfg.block, a->rope_cos, a->rope_sin);
  return a;
}

void ft_acts_destroy(ft_acts *a) {
  if (!a) return;
  ftl_free(a->pool);
  ftl_free(a->tokens);
  ftl_free(a->targets);
  ftl_free(a);
}

const float *ft_acts_logits(const ft_acts *acts) { return acts->logits; }

static lin_args lin_of(const ft_params *p, const ft_lora *lora, int layer, int k) {
  const ft_config *c = &p->cfg;
  lin_args a = {.w = p->layer[layer].w[k], .IC = ft_lin_in(c, (ft_lin)k), .OC = ft_lin_out(c, (ft_lin)k)};
  if (lora && lora->A[layer][k]) {
    a.A = lora->A[layer][k];
    a.B = lora->B[layer][k];
    a.r = lora->rank;
    a.scale = ft_lora_scale(lora);
  }
  return a;
}

/* ---- forward and backward ------------------------------------------------------------------ */

double ft_forward(const ft_params *p, const ft_lora *lora, const int *tokens, const int *targets, int B, int T,
                  ft_acts *acts, int64_t *n_scored) {
  const ft_config *c = &p->cfg;
  int C = c->embd, N = B * T, I = c->intermediate;
  float eps = (float)c->rms_eps;
  acts->b = B;
  acts->t = T;
  memcpy(acts->tokens, tokens, (size_t)N * sizeof(int));
  acts->targets_given = targets != NULL;
  for (int i = 0; i < N; i++)
    acts->targets[i] = targets ? targets[i] : -1;

  float *x = acts->l[0].in;
  for (int n = 0; n < N; n++)
    memcpy(x + (size_t)n * C, p->embed + (size_t)tokens[n] * C, (size_t)C * sizeof(float));
  for (int i = 0; i < c->layers; i++) {
    layer_acts *l = &acts->l[i];
    const ft_block *w = &p->layer[i];
    float *next = i + 1 < c->layers ? acts->l[i + 1].in : acts->out;
    rmsnorm_forward(l->n1, l->n1_rstd, l->in, w->attn_norm, eps, N, C);
    lin_args a;
    a = lin_of(p, lora, i, FT_LIN_Q);
    linear_forward(l->q, l->u[FT_LIN_Q], l->n1, &a, N);
    a = lin_of(p, lora, i, FT_LIN_K);
    linear_forward(l->k, l->u[FT_LIN_K], l->n1, &a, N);
    a = lin_of(p, lora, i, FT_LIN_V);
    linear_forward(l->v, l->u[FT_LIN_V], l->n1, &a, N);
    rope_apply(l->q, acts->rope_cos, acts->rope_sin, B, T, C, c->heads, 1.0f);
    rope_apply(l->k, acts->rope_cos, acts->rope_sin, B, T, C, c->heads, 1.0f);
    attention_forward(l->atty, l->att, l->q, l->k, l->v, B, T, C, c->heads);
    a = lin_of(p, lora, i, FT_LIN_O);
    linear_forward(l->res2, l->u[FT_LIN_O], l->atty, &a, N);
    for (size_t j = 0; j < (size_t)N * C; j++)
      l->res2[j] += l->in[j];
    rmsnorm_forward(l->n2, l->n2_rstd, l->res2, w->mlp_norm, eps, N, C);
    a = lin_of(p, lora, i, FT_LIN_GATE);
    linear_forward(l->g, l->u[FT_LIN_GATE], l->n2, &a, N);
    a = lin_of(p, lora, i, FT_LIN_UP);
    linear_forward(l->up, l->u[FT_LIN_UP], l->n2, &a, N);
    swiglu_forward(l->m, l->g, l->up, (size_t)N * I);
    a = lin_of(p, lora, i, FT_LIN_DOWN);
    linear_forward(next, l->u[FT_LIN_DOWN], l->m, &a, N);
    for (size_t j = 0; j < (size_t)N * C; j++)
      next[j] += l->res2[j];
  }
  rmsnorm_forward(acts->nf, acts->nf_rstd, acts->out, p->norm, eps, N, C);

  double loss = 0.0;
  int64_t scored = 0;
  for (int t = 0; t < N; t++) {
    int y = acts->targets[t];
    if (targets && y < 0) continue;
    float *lg = acts->logits + (size_t)t * FT_VOCAB;
    const float *h = acts->nf + (size_t)t * C;
    for (int v = 0; v < FT_VOCAB; v++)
      lg[v] = dot(h, p->embed + (size_t)v * C, C);
    if (!targets) continue;
    /* The probabilities replace the logits; the argmax and the loss are read from them. */
    float maxv = lg[0];
    for (int v = 1; v < FT_VOCAB; v++)
      if (lg[v] > maxv) maxv = lg[v];
    float sum = 0.0f;
    for (int v = 0; v < FT_VOCAB; v++) {
      lg[v] = expf(lg[v] - maxv);
      sum += lg[v];
    }
    float inv = 1.0f / sum;
    for (int v = 0; v < FT_VOCAB; v++)
      lg[v] *= inv;
    loss += -log((double)lg[y] + 1e-30);
    scored++;
  }
  if (n_scored) *n_scored = scored;
  return loss;
}

void ft_sequence_metrics(const ft_acts *acts, int i, double *loss_sum, int *scored, int *exact) {
  double loss = 0.0;
  int n = 0, ok = 1;
  for (int t = 0; t < acts->t; t++) {
    int pos = i * acts->t + t, y = acts->targets[pos];
    if (y < 0) continue;
    const float *pr = acts->logits + (size_t)pos * FT_VOCAB;
    int best = 0;
    for (int v = 1; v < FT_VOCAB; v++)
      if (pr[v] > pr[best]) best = v;
    if (best != y) ok = 0;
    loss += -log((double)pr[y] + 1e-30);
    n++;
  }
  *loss_sum = loss;
  *scored = n;
  *exact = ok && n > 0;
}

void ft_backward(const ft_params *p, const ft_lora *lora, ft_params *dp, ft_lora *dl, ft_acts *acts, float loss_scale) {
  const ft_config *c = &p->cfg;
  int C = c->embd, B = acts->b, T = acts->t, N = B * T, I = c->intermediate;
  size_t NC = (size_t)N * C, NI = (size_t)N * I;
  float *dres = acts->d_res, *da = acts->d_a;
  float *datt = acts->scratch, *du = acts->scratch + T;

  /* Cross-entropy and the tied LM head. */
  memset(da, 0, NC * sizeof(float));
  for (int t = 0; t < N; t++) {
    int y = acts->targets[t];
    if (y < 0) continue;
    float *pr = acts->logits + (size_t)t * FT_VOCAB;
    const float *h = acts->nf + (size_t)t * C;
    for (int v = 0; v < FT_VOCAB; v++) {
      float g = (pr[v] - (v == y ? 1.0f : 0.0f)) * loss_scale;
      axpy(da + (size_t)t * C, g, p->embed + (size_t)v * C, C);
      if (dp) axpy(dp->embed + (size_t)v * C, g, h, C);
    }
  }
  memset(dres, 0, NC * sizeof(float));
  rmsnorm_backward(dres, dp ? dp->norm : NULL, da, acts->out, p->norm, acts->nf_rstd, N, C);

  for (int i = c->layers - 1; i >= 0; i--) {
    layer_acts *l = &acts->l[i];
    const ft_block *w = &p->layer[i];
    ft_block *dw = dp ? &dp->layer[i] : NULL;
#define DW(k) (dw ? dw->w[k] : NULL)
#define DA(k) (dl && dl->A[i][k] ? dl->A[i][k] : NULL)
#define DBL(k) (dl && dl->B[i][k] ? dl->B[i][k] : NULL)
    /* dres holds d(output of the layer); it flows to res2 unchanged and through the MLP. */
    float *dres2 = acts->d_res2;
    memcpy(dres2, dres, NC * sizeof(float));
    memset(acts->d_m, 0, NI * sizeof(float));
    lin_args a = lin_of(p, lora, i, FT_LIN_DOWN);
    linear_backward(acts->d_m, DW(FT_LIN_DOWN), DA(FT_LIN_DOWN), DBL(FT_LIN_DOWN), du, dres, l->m, l->u[FT_LIN_DOWN],
                    &a, N);
    swiglu_backward(acts->d_g, acts->d_up, acts->d_m, l->g, l->up, NI);
    memset(da, 0, NC * sizeof(float));
    a = lin_of(p, lora, i, FT_LIN_GATE);
    linear_backward(da, DW(FT_LIN_GATE), DA(FT_LIN_GATE), DBL(FT_LIN_GATE), du, acts->d_g, l->n2, l->u[FT_LIN_GATE],
                    &a, N);
    a = lin_of(p, lora, i, FT_LIN_UP);
    linear_backward(da, DW(FT_LIN_UP), DA(FT_LIN_UP), DBL(FT_LIN_UP), du, acts->d_up, l->n2, l->u[FT_LIN_UP], &a, N);
    rmsnorm_backward(dres2, dw ? dw->mlp_norm : NULL, da, l->res2, w->mlp_norm, l->n2_rstd, N, C);
    /* dres2 flows to the layer input unchanged and through attention. */
    memcpy(dres, dres2, NC * sizeof(float));
    float *datty = acts->d_b;
    memset(datty, 0, NC * sizeof(float));
    a = lin_of(p, lora, i, FT_LIN_O);
    linear_backward(datty, DW(FT_LIN_O), DA(FT_LIN_O), DBL(FT_LIN_O), du, dres2, l->atty, l->u[FT_LIN_O], &a, N);
    memset(acts->d_q, 0, NC * sizeof(float));
    memset(acts->d_k, 0, NC * sizeof(float));
    memset(acts->d_v, 0, NC * sizeof(float));
    attention_backward(acts->d_q, acts->d_k, acts->d_v, datt, datty, l->q, l->k, l->v, l->att, B, T, C, c->heads);
    /* Back through the rotation: its transpose is the inverse rotation. */
    rope_apply(acts->d_q, acts->rope_cos, acts->rope_sin, B, T, C, c->heads, -1.0f);
    rope_apply(acts->d_k, acts->rope_cos, acts->rope_sin, B, T, C, c->heads, -1.0f);
    memset(da, 0, NC * sizeof(float));
    a = lin_of(p, lora, i, FT_LIN_Q);
    linear_backward(da, DW(FT_LIN_Q), DA(FT_LIN_Q), DBL(FT_LIN_Q), du, acts->d_q, l->n1, l->u[FT_LIN_Q], &a, N);
    a = lin_of(p, lora, i, FT_LIN_K);
    linear_backward(da, DW(FT_LIN_K), DA(FT_LIN_K), DBL(FT_LIN_K), du, acts->d_k, l->n1, l->u[FT_LIN_K], &a, N);
    a = lin_of(p, lora, i, FT_LIN_V);
    linear_backward(da, DW(FT_LIN_V), DA(FT_LIN_V), DBL(FT_LIN_V), du, acts->d_v, l->n1, l->u[FT_LIN_V], &a, N);
    rmsnorm_backward(dres, dw ? dw->attn_norm : NULL, da, l->in, w->attn_norm, l->n1_rstd, N, C);
#undef DW
#undef DA
#undef DBL
  }
  if (dp) {
    for (int n = 0; n < N; n++)
      axpy(dp->embed + (size_t)acts->tokens[n] * C, 1.0f, dres + (size_t)n * C, C);
  }
}

/* ---- AdamW --------------------------------------------------------------------------------- */

void ft_adamw_update(const ft_adamw *o, float *param, const float *grad, float *m, float *v, size_t n, int64_t step) {
  float bc1 = 1.0f - powf(o->beta1, (float)step), bc2 = 1.0f - powf(o->beta2, (float)step);
  for (size_t i = 0; i < n; i++) {
    float g = grad[i];
    m[i] = o->beta1 * m[i] + (1.0f - o->beta1) * g;
    v[i] = o->beta2 * v[i] + (1.0f - o->beta2) * g * g;
    float mh = m[i] / bc1, vh = v[i] / bc2;
    param[i] -= o->lr * (mh / (sqrtf(vh) + o->eps) + o->weight_decay * param[i]);
  }
}
