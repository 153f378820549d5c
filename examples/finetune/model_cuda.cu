/* examples/finetune/model_cuda.cu: the forward and backward passes on a CUDA GPU (model_cuda.h).
 *
 * Map: device buffers (weights, adapter, activations, gradients); kernels, one output per thread,
 * forward then backward, each a transcription of the CPU loop of the same name in model.c with
 * the same summation order where it is one loop; the two passes; the C entry points.
 *
 * Deliberately simple: no shared-memory tiling, no cuBLAS. The model is tiny and the point is a
 * readable GPU path with a CPU reference, not peak speed. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "model.h"
}
#include "model_cuda.h"

#define CK(call)                                                                                                       \
  do {                                                                                                                 \
    cudaError_t e_ = (call);                                                                                           \
    if (e_ != cudaSuccess) {                                                                                           \
      snprintf(msg, msg_size, "%s: %s", #call, cudaGetErrorString(e_));                                                \
      return -1;                                                                                                       \
    }                                                                                                                  \
  } while (0)
#define LAUNCH(kernel, n, ...)                                                                                         \
  do {                                                                                                                 \
    int n_ = (n);                                                                                                      \
    if (n_ > 0) kernel<<<(n_ + 255) / 256, 256>>>(__VA_ARGS__);                                                        \
    CK(cudaGetLastError());                                                                                            \
  } while (0)

/* ---- device buffers ------------------------------------------------------------------------ */

typedef struct dev_layer {
  float *in, *n1, *n1_rstd, *q, *k, *v, *att, *atty, *res2, *n2, *n2_rstd, *g, *up, *m;
  float *u[FT_LIN_COUNT];
} dev_layer;

struct ft_cuda {
  ft_config cfg;
  int r, max_b, b, t;
  float scale;
  unsigned targets;
  ft_params host_layout; /* host views used only for offsets into the flat arrays */
  ft_lora lora_layout;
  float *w;    /* base weights, p->count floats */
  float *lora; /* adapter, lora_layout.count floats */
  float *grad; /* adapter gradients, count + 1 floats */
  float *pool;
  dev_layer l[FT_MAX_LAYERS];
  float *rope_cos, *rope_sin; /* [block, head/2], model.c's table (ft_rope_table) */
  float *out, *nf, *nf_rstd, *probs;
  double *losses;
  float *d_res, *d_res2, *d_a, *d_b, *d_atty, *d_q, *d_k, *d_v, *d_m, *d_g, *d_up, *dpre;
  int *tokens, *targets_d;
  int *targets_h;
};

static const float *W(const ft_cuda *g, const float *host_ptr) { return g->w + (host_ptr - g->host_layout.mem); }
static float *LW(const ft_cuda *g, const float *host_ptr, float *base) {
  return base + (host_ptr - g->lora_layout.mem);
}


/* ---- kernels: forward ---------------------------------------------------------------------- */

__device__ float dot8(const float *a, const float *b, int n) {
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

__global__ void k_encode(float *out, const int *tok, const float *embed, int N, int C) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C) return;
  int n = i / C, c = i % C;
  out[i] = embed[(size_t)tok[n] * C + c];
}

__global__ void k_rmsnorm(float *out, float *rstd, const float *inp, const float *w, float eps, int N, int C) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const float *x = inp + (size_t)n * C;
  float s = 1.0f / sqrtf(dot8(x, x, C) / (float)C + eps);
  float *o = out + (size_t)n * C;
  for (int i = 0; i < C; i++)
    o[i] = w[i] * (x[i] * s);
  rstd[n] = s;
}

__global__ void k_linear(float *out, const float *inp, const float *w, int N, int IC, int OC) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * OC) return;
  int n = i / OC, o = i % OC;
  out[i] = dot8(inp + (size_t)n * IC, w + (size_t)o * IC, IC);
}

/* One thread per (position, head, pair i < head/2); dir -1: the inverse rotation (backward). */
__global__ void k_rope(float *x, const float *cosv, const float *sinv, int N, int T, int C, int H, float dir) {
  int hs = C / H, half = hs / 2;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * H * half) return;
  int j = i % half, h = (i / half) % H, n = i / (half * H), t = n % T;
  float *v = x + (size_t)n * C + h * hs;
  float x1 = v[j], x2 = v[j + half], c = cosv[(size_t)t * half + j], s = dir * sinv[(size_t)t * half + j];
  v[j] = x1 * c - x2 * s;
  v[j + half] = x2 * c + x1 * s;
}

__global__ void k_lora_u(float *u, const float *inp, const float *A, int N, int IC, int r) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * r) return;
  int n = i / r, j = i % r;
  u[i] = dot8(inp + (size_t)n * IC, A + (size_t)j * IC, IC);
}

__global__ void k_lora_add(float *out, const float *u, const float *B, float scale, int N, int OC, int r) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * OC) return;
  int n = i / OC, o = i % OC;
  out[i] += scale * dot8(B + (size_t)o * r, u + (size_t)n * r, r);
}

__global__ void k_attention(float *out, float *att, const float *q, const float *k, const float *v, int B, int T, int C,
                            int H) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= B * T * H) return;
  int h = i % H, t = (i / H) % T, b = i / (H * T);
  int hs = C / H;
  float scale = 1.0f / sqrtf((float)hs);
  const float *qt = q + ((size_t)b * T + t) * C + h * hs;
  float *a = att + (((size_t)b * H + h) * T + t) * T;
  float maxv = -INFINITY;
  for (int t2 = 0; t2 <= t; t2++) {
    a[t2] = scale * dot8(qt, k + ((size_t)b * T + t2) * C + h * hs, hs);
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
  for (int c = 0; c < hs; c++) {
    float s = 0.0f;
    for (int t2 = 0; t2 <= t; t2++)
      s += a[t2] * v[((size_t)b * T + t2) * C + h * hs + c];
    o[c] = s;
  }
}

__global__ void k_swiglu(float *m, const float *g, const float *up, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = g[i];
  m[i] = (x / (1.0f + expf(-x))) * up[i];
}

__global__ void k_add_inplace(float *y, const float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void k_logits(float *logits, const float *nf, const float *embed, const int *targets, int N, int C) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * FT_VOCAB) return;
  int n = i / FT_VOCAB, v = i % FT_VOCAB;
  logits[i] = targets[n] < 0 ? 0.0f : dot8(nf + (size_t)n * C, embed + (size_t)v * C, C);
}

__global__ void k_softmax_loss(float *probs, double *losses, const int *targets, int N) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  int y = targets[n];
  if (y < 0) {
    losses[n] = 0.0;
    return;
  }
  float *lg = probs + (size_t)n * FT_VOCAB;
  float maxv = lg[0];
  for (int v = 1; v < FT_VOCAB; v++)
    maxv = fmaxf(maxv, lg[v]);
  float sum = 0.0f;
  for (int v = 0; v < FT_VOCAB; v++) {
    lg[v] = expf(lg[v] - maxv);
    sum += lg[v];
  }
  float inv = 1.0f / sum;
  for (int v = 0; v < FT_VOCAB; v++)
    lg[v] *= inv;
  losses[n] = -log((double)lg[y] + 1e-30);
}

/* ---- kernels: backward --------------------------------------------------------------------- */

__global__ void k_dnf(float *dx, const float *probs, const int *targets, const float *embed, float scale, int N,
                      int C) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C) return;
  int n = i / C, c = i % C, y = targets[n];
  float s = 0.0f;
  if (y >= 0) {
    const float *p = probs + (size_t)n * FT_VOCAB;
    for (int v = 0; v < FT_VOCAB; v++)
      s += ((p[v] - (v == y ? 1.0f : 0.0f)) * scale) * embed[(size_t)v * C + c];
  }
  dx[i] = s;
}

__global__ void k_rmsnorm_bwd(float *dinp, const float *dout, const float *inp, const float *w, const float *rstd,
                              int N, int C) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const float *dy = dout + (size_t)n * C, *x = inp + (size_t)n * C;
  float *dx = dinp + (size_t)n * C;
  float s = rstd[n], m = 0.0f;
  for (int i = 0; i < C; i++)
    m += w[i] * dy[i] * x[i];
  m /= (float)C;
  float s3m = s * s * s * m;
  for (int i = 0; i < C; i++)
    dx[i] += s * w[i] * dy[i] - s3m * x[i];
}

__global__ void k_linear_bwd_dx(float *dinp, const float *dout, const float *w, int N, int IC, int OC) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * IC) return;
  int n = i / IC, c = i % IC;
  const float *dy = dout + (size_t)n * OC;
  float s = 0.0f;
  for (int o = 0; o < OC; o++)
    s += dy[o] * w[(size_t)o * IC + c];
  dinp[i] += s;
}

__global__ void k_lora_du(float *du, const float *dout, const float *B, float scale, int N, int OC, int r) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * r) return;
  int n = i / r, j = i % r;
  float s = 0.0f;
  for (int o = 0; o < OC; o++)
    s += (scale * dout[(size_t)n * OC + o]) * B[(size_t)o * r + j];
  du[i] = s;
}

__global__ void k_lora_dx(float *dinp, const float *du, const float *A, int N, int IC, int r) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * IC) return;
  int n = i / IC, c = i % IC;
  float s = 0.0f;
  for (int j = 0; j < r; j++)
    s += du[(size_t)n * r + j] * A[(size_t)j * IC + c];
  dinp[i] += s;
}

__global__ void k_lora_dA(float *dA, const float *du, const float *x, int N, int IC, int r) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= r * IC) return;
  int j = i / IC, c = i % IC;
  float s = 0.0f;
  for (int n = 0; n < N; n++)
    s += du[(size_t)n * r + j] * x[(size_t)n * IC + c];
  dA[i] = s;
}

__global__ void k_lora_dB(float *dB, const float *dout, const float *u, float scale, int N, int OC, int r) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= OC * r) return;
  int o = i / r, j = i % r;
  float s = 0.0f;
  for (int n = 0; n < N; n++)
    s += (scale * dout[(size_t)n * OC + o]) * u[(size_t)n * r + j];
  dB[i] = s;
}

__global__ void k_swiglu_bwd(float *dg, float *dup, const float *dm, const float *g, const float *up, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = g[i], s = 1.0f / (1.0f + expf(-x));
  dg[i] = dm[i] * up[i] * (s * (1.0f + x * (1.0f - s)));
  dup[i] = dm[i] * (x * s);
}

/* dpre[b, h, t, t2] = att * (datt - sum(att * datt)) * scale, the gradient of the pre-softmax
 * score (times the 1/sqrt(hs) scale, so dq and dk need no further factor). */
__global__ void k_attn_dpre(float *dpre, const float *dout, const float *v, const float *att, int B, int T, int C,
                            int H) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= B * T * H) return;
  int h = i % H, t = (i / H) % T, b = i / (H * T);
  int hs = C / H;
  float scale = 1.0f / sqrtf((float)hs);
  const float *a = att + (((size_t)b * H + h) * T + t) * T;
  const float *dy = dout + ((size_t)b * T + t) * C + h * hs;
  float *dp = dpre + (((size_t)b * H + h) * T + t) * T;
  float s = 0.0f;
  for (int t2 = 0; t2 <= t; t2++)
    s += a[t2] * dot8(dy, v + ((size_t)b * T + t2) * C + h * hs, hs);
  for (int t2 = 0; t2 < T; t2++)
    dp[t2] = t2 <= t ? a[t2] * (dot8(dy, v + ((size_t)b * T + t2) * C + h * hs, hs) - s) * scale : 0.0f;
}

/* dq[b,t,c] = sum_{t2 <= t} dpre[t, t2] k[b,t2,c] */
__global__ void k_attn_dq(float *dq, const float *dpre, const float *k, int B, int T, int C, int H) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= B * T * C) return;
  int c = i % C, t = (i / C) % T, b = i / (C * T), h = c / (C / H);
  const float *dp = dpre + (((size_t)b * H + h) * T + t) * T;
  float s = 0.0f;
  for (int t2 = 0; t2 <= t; t2++)
    s += dp[t2] * k[((size_t)b * T + t2) * C + c];
  dq[i] = s;
}

/* dk[b,t2,c] = sum_{t >= t2} dpre[t, t2] q[b,t,c]; dv[b,t2,c] = sum_{t >= t2} att[t, t2] dout[b,t,c] */
__global__ void k_attn_dkv(float *dk, float *dv, const float *dpre, const float *att, const float *q, const float *dout,
                           int B, int T, int C, int H) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= B * T * C) return;
  int c = i % C, t2 = (i / C) % T, b = i / (C * T), h = c / (C / H);
  float sk = 0.0f, sv = 0.0f;
  for (int t = t2; t < T; t++) {
    size_t at = (((size_t)b * H + h) * T + t) * T + t2, x = ((size_t)b * T + t) * C + c;
    sk += dpre[at] * q[x];
    sv += att[at] * dout[x];
  }
  dk[i] = sk;
  dv[i] = sv;
}

/* ---- the passes ---------------------------------------------------------------------------- */

typedef struct dlin {
  const float *w, *A, *B;
  float *dA, *dB;
  int IC, OC;
} dlin;

static dlin lin_of(ft_cuda *g, int use_lora, int layer, int k) {
  dlin d;
  memset(&d, 0, sizeof d);
  d.w = W(g, g->host_layout.layer[layer].w[k]);
  d.IC = ft_lin_in(&g->cfg, (ft_lin)k);
  d.OC = ft_lin_out(&g->cfg, (ft_lin)k);
  if (use_lora && g->lora_layout.A[layer][k]) {
    d.A = LW(g, g->lora_layout.A[layer][k], g->lora);
    d.B = LW(g, g->lora_layout.B[layer][k], g->lora);
    d.dA = LW(g, g->lora_layout.A[layer][k], g->grad);
    d.dB = LW(g, g->lora_layout.B[layer][k], g->grad);
  }
  return d;
}

static int linear(ft_cuda *g, float *out, float *u, const float *inp, const dlin *d, int N, char *msg,
                  size_t msg_size) {
  LAUNCH(k_linear, N * d->OC, out, inp, d->w, N, d->IC, d->OC);
  if (d->A) {
    LAUNCH(k_lora_u, N * g->r, u, inp, d->A, N, d->IC, g->r);
    LAUNCH(k_lora_add, N * d->OC, out, u, d->B, g->scale, N, d->OC, g->r);
  }
  return 0;
}

/* dinp += d(inp) of the layer; the adapter's dA, dB are written. du is scratch [N, r]. */
static int linear_bwd(ft_cuda *g, float *dinp, float *du, const float *dout, const float *inp, const float *u,
                      const dlin *d, int N, char *msg, size_t msg_size) {
  LAUNCH(k_linear_bwd_dx, N * d->IC, dinp, dout, d->w, N, d->IC, d->OC);
  if (d->A) {
    LAUNCH(k_lora_du, N * g->r, du, dout, d->B, g->scale, N, d->OC, g->r);
    LAUNCH(k_lora_dx, N * d->IC, dinp, du, d->A, N, d->IC, g->r);
    LAUNCH(k_lora_dA, g->r * d->IC, d->dA, du, inp, N, d->IC, g->r);
    LAUNCH(k_lora_dB, d->OC * g->r, d->dB, dout, u, g->scale, N, d->OC, g->r);
  }
  return 0;
}

static int forward(ft_cuda *g, int use_lora, int B, int T, char *msg, size_t msg_size) {
  const ft_config *c = &g->cfg;
  const ft_params *hp = &g->host_layout;
  int C = c->embd, N = B * T, I = c->intermediate, H = c->heads, half = C / H / 2;
  float eps = (float)c->rms_eps;
  LAUNCH(k_encode, N * C, g->l[0].in, g->tokens, W(g, hp->embed), N, C);
  for (int i = 0; i < c->layers; i++) {
    dev_layer *l = &g->l[i];
    const ft_block *w = &hp->layer[i];
    float *next = i + 1 < c->layers ? g->l[i + 1].in : g->out;
    LAUNCH(k_rmsnorm, N, l->n1, l->n1_rstd, l->in, W(g, w->attn_norm), eps, N, C);
    dlin d = lin_of(g, use_lora, i, FT_LIN_Q);
    if (linear(g, l->q, l->u[FT_LIN_Q], l->n1, &d, N, msg, msg_size)) return -1;
    d = lin_of(g, use_lora, i, FT_LIN_K);
    if (linear(g, l->k, l->u[FT_LIN_K], l->n1, &d, N, msg, msg_size)) return -1;
    d = lin_of(g, use_lora, i, FT_LIN_V);
    if (linear(g, l->v, l->u[FT_LIN_V], l->n1, &d, N, msg, msg_size)) return -1;
    LAUNCH(k_rope, N * H * half, l->q, g->rope_cos, g->rope_sin, N, T, C, H, 1.0f);
    LAUNCH(k_rope, N * H * half, l->k, g->rope_cos, g->rope_sin, N, T, C, H, 1.0f);
    LAUNCH(k_attention, B * T * H, l->atty, l->att, l->q, l->k, l->v, B, T, C, H);
    d = lin_of(g, use_lora, i, FT_LIN_O);
    if (linear(g, l->res2, l->u[FT_LIN_O], l->atty, &d, N, msg, msg_size)) return -1;
    LAUNCH(k_add_inplace, N * C, l->res2, l->in, N * C);
    LAUNCH(k_rmsnorm, N, l->n2, l->n2_rstd, l->res2, W(g, w->mlp_norm), eps, N, C);
    d = lin_of(g, use_lora, i, FT_LIN_GATE);
    if (linear(g, l->g, l->u[FT_LIN_GATE], l->n2, &d, N, msg, msg_size)) return -1;
    d = lin_of(g, use_lora, i, FT_LIN_UP);
    if (linear(g, l->up, l->u[FT_LIN_UP], l->n2, &d, N, msg, msg_size)) return -1;
    LAUNCH(k_swiglu, N * I, l->m, l->g, l->up, N * I);
    d = lin_of(g, use_lora, i, FT_LIN_DOWN);
    if (linear(g, next, l->u[FT_LIN_DOWN], l->m, &d, N, msg, msg_size)) return -1;
    LAUNCH(k_add_inplace, N * C, next, l->res2, N * C);
  }
  LAUNCH(k_rmsnorm, N, g->nf, g->nf_rstd, g->out, W(g, hp->norm), eps, N, C);
  LAUNCH(k_logits, N * FT_VOCAB, g->probs, g->nf, W(g, hp->embed), g->targets_d, N, C);
  LAUNCH(k_softmax_loss, N, g->probs, g->losses, g->targets_d, N);
  return 0;
}

static int backward(ft_cuda *g, float loss_scale, char *msg, size_t msg_size) {
  const ft_config *c = &g->cfg;
  const ft_params *hp = &g->host_layout;
  int C = c->embd, B = g->b, T = g->t, N = B * T, I = c->intermediate, H = c->heads, half = C / H / 2;
  size_t NC = (size_t)N * C * sizeof(float), NI = (size_t)N * I * sizeof(float);
  float *du = g->d_b; /* [N, r] fits in [N, C] since r <= C is checked at create */
  CK(cudaMemset(g->grad, 0, g->lora_layout.count * sizeof(float)));
  LAUNCH(k_dnf, N * C, g->d_a, g->probs, g->targets_d, W(g, hp->embed), loss_scale, N, C);
  CK(cudaMemset(g->d_res, 0, NC));
  LAUNCH(k_rmsnorm_bwd, N, g->d_res, g->d_a, g->out, W(g, hp->norm), g->nf_rstd, N, C);
  for (int i = c->layers - 1; i >= 0; i--) {
    dev_layer *l = &g->l[i];
    const ft_block *w = &hp->layer[i];
    CK(cudaMemcpy(g->d_res2, g->d_res, NC, cudaMemcpyDeviceToDevice));
    CK(cudaMemset(g->d_m, 0, NI));
    dlin d = lin_of(g, 1, i, FT_LIN_DOWN);
    if (linear_bwd(g, g->d_m, du, g->d_res, l->m, l->u[FT_LIN_DOWN], &d, N, msg, msg_size)) return -1;
    LAUNCH(k_swiglu_bwd, N * I, g->d_g, g->d_up, g->d_m, l->g, l->up, N * I);
    CK(cudaMemset(g->d_a, 0, NC));
    d = lin_of(g, 1, i, FT_LIN_GATE);
    if (linear_bwd(g, g->d_a, du, g->d_g, l->n2, l->u[FT_LIN_GATE], &d, N, msg, msg_size)) return -1;
    d = lin_of(g, 1, i, FT_LIN_UP);
    if (linear_bwd(g, g->d_a, du, g->d_up, l->n2, l->u[FT_LIN_UP], &d, N, msg, msg_size)) return -1;
    LAUNCH(k_rmsnorm_bwd, N, g->d_res2, g->d_a, l->res2, W(g, w->mlp_norm), l->n2_rstd, N, C);
    CK(cudaMemcpy(g->d_res, g->d_res2, NC, cudaMemcpyDeviceToDevice));
    float *datty = g->d_atty;
    CK(cudaMemset(datty, 0, NC));
    d = lin_of(g, 1, i, FT_LIN_O);
    if (linear_bwd(g, datty, du, g->d_res2, l->atty, l->u[FT_LIN_O], &d, N, msg, msg_size)) return -1;
    LAUNCH(k_attn_dpre, B * T * H, g->dpre, datty, l->v, l->att, B, T, C, H);
    LAUNCH(k_attn_dq, N * C, g->d_q, g->dpre, l->k, B, T, C, H);
    LAUNCH(k_attn_dkv, N * C, g->d_k, g->d_v, g->dpre, l->att, l->q, datty, B, T, C, H);
    /* Back through the rotation: its transpose is the inverse rotation. */
    LAUNCH(k_rope, N * H * half, g->d_q, g->rope_cos, g->rope_sin, N, T, C, H, -1.0f);
    LAUNCH(k_rope, N * H * half, g->d_k, g->rope_cos, g->rope_sin, N, T, C, H, -1.0f);
    CK(cudaMemset(g->d_a, 0, NC));
    d = lin_of(g, 1, i, FT_LIN_Q);
    if (linear_bwd(g, g->d_a, du, g->d_q, l->n1, l->u[FT_LIN_Q], &d, N, msg, msg_size)) return -1;
    d = lin_of(g, 1, i, FT_LIN_K);
    if (linear_bwd(g, g->d_a, du, g->d_k, l->n1, l->u[FT_LIN_K], &d, N, msg, msg_size)) return -1;
    d = lin_of(g, 1, i, FT_LIN_V);
    if (linear_bwd(g, g->d_a, du, g->d_v, l->n1, l->u[FT_LIN_V], &d, N, msg, msg_size)) return -1;
    LAUNCH(k_rmsnorm_bwd, N, g->d_res, g->d_a, l->in, W(g, w->attn_norm), l->n1_rstd, N, C);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}

/* ---- entry points -------------------------------------------------------------------------- */

extern "C" int ft_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky "no driver" error */
    return 0;
  }
  return n;
}

extern "C" int ft_cuda_select_device(int index, char *msg, size_t msg_size) {
  CK(cudaSetDevice(index));
  return 0;
}

static size_t pool_take(ft_cuda *g, float **p, size_t n, size_t used) {
  if (p) *p = g->pool ? g->pool + used : NULL;
  return used + n;
}

static size_t layout_pool(ft_cuda *g) {
  const ft_config *c = &g->cfg;
  size_t N = (size_t)g->max_b * c->block, C = c->embd, T = c->block, H = c->heads, I = c->intermediate, u = 0;
  for (int i = 0; i < c->layers; i++) {
    dev_layer *l = &g->l[i];
    u = pool_take(g, &l->in, N * C, u);
    u = pool_take(g, &l->n1, N * C, u);
    u = pool_take(g, &l->n1_rstd, N, u);
    u = pool_take(g, &l->q, N * C, u);
    u = pool_take(g, &l->k, N * C, u);
    u = pool_take(g, &l->v, N * C, u);
    u = pool_take(g, &l->att, (size_t)g->max_b * H * T * T, u);
    u = pool_take(g, &l->atty, N * C, u);
    u = pool_take(g, &l->res2, N * C, u);
    u = pool_take(g, &l->n2, N * C, u);
    u = pool_take(g, &l->n2_rstd, N, u);
    u = pool_take(g, &l->g, N * I, u);
    u = pool_take(g, &l->up, N * I, u);
    u = pool_take(g, &l->m, N * I, u);
    for (int k = 0; k < FT_LIN_COUNT; k++)
      u = pool_take(g, &l->u[k], N * (size_t)g->r, u);
  }
  u = pool_take(g, &g->rope_cos, T * (C / H / 2), u);
  u = pool_take(g, &g->rope_sin, T * (C / H / 2), u);
  u = pool_take(g, &g->out, N * C, u);
  u = pool_take(g, &g->nf, N * C, u);
  u = pool_take(g, &g->nf_rstd, N, u);
  u = pool_take(g, &g->probs, N * FT_VOCAB, u);
  u = pool_take(g, &g->d_res, N * C, u);
  u = pool_take(g, &g->d_res2, N * C, u);
  u = pool_take(g, &g->d_a, N * C, u);
  u = pool_take(g, &g->d_b, N * C, u);
  u = pool_take(g, &g->d_atty, N * C, u);
  u = pool_take(g, &g->d_q, N * C, u);
  u = pool_take(g, &g->d_k, N * C, u);
  u = pool_take(g, &g->d_v, N * C, u);
  u = pool_take(g, &g->d_m, N * I, u);
  u = pool_take(g, &g->d_g, N * I, u);
  u = pool_take(g, &g->d_up, N * I, u);
  u = pool_take(g, &g->dpre, (size_t)g->max_b * H * T * T, u);
  return u;
}

extern "C" void ft_cuda_destroy(ft_cuda *g) {
  if (!g) return;
  cudaFree(g->w);
  cudaFree(g->lora);
  cudaFree(g->grad);
  cudaFree(g->pool);
  cudaFree(g->losses);
  cudaFree(g->tokens);
  cudaFree(g->targets_d);
  free(g->targets_h);
  ft_params_destroy(&g->host_layout);
  ft_lora_destroy(&g->lora_layout);
  free(g);
}

static int create(const ft_params *p, int r, float alpha, unsigned targets, int max_b, ft_cuda *g, char *msg,
                  size_t msg_size) {
  g->cfg = p->cfg;
  g->r = r;
  g->max_b = max_b;
  g->scale = alpha / (float)r;
  g->targets = targets;
  if (r > p->cfg.embd || max_b < 1) {
    snprintf(msg, msg_size, "CUDA path: LoRA rank must be at most embd and max_b at least 1");
    return -1;
  }
  if (ft_params_create(&g->host_layout, &p->cfg) || ft_lora_create(&g->lora_layout, &p->cfg, r, alpha, targets)) {
    snprintf(msg, msg_size, "out of memory");
    return -1;
  }
  size_t N = (size_t)max_b * p->cfg.block;
  g->targets_h = (int *)calloc(N, sizeof(int));
  if (!g->targets_h) {
    snprintf(msg, msg_size, "out of memory");
    return -1;
  }
  CK(cudaMalloc((void **)&g->w, p->count * sizeof(float)));
  CK(cudaMemcpy(g->w, p->mem, p->count * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMalloc((void **)&g->lora, (g->lora_layout.count + 1) * sizeof(float)));
  CK(cudaMemset(g->lora, 0, (g->lora_layout.count + 1) * sizeof(float)));
  CK(cudaMalloc((void **)&g->grad, (g->lora_layout.count + 1) * sizeof(float)));
  CK(cudaMemset(g->grad, 0, (g->lora_layout.count + 1) * sizeof(float)));
  size_t pool = layout_pool(g);
  CK(cudaMalloc((void **)&g->pool, pool * sizeof(float)));
  layout_pool(g);
  {
    /* The rotary table: model.c's, computed on the host, so both paths rotate by the same floats. */
    size_t n = (size_t)p->cfg.block * (size_t)(p->cfg.embd / p->cfg.heads / 2);
    float *tab = (float *)calloc(2 * n + 1, sizeof(float));
    if (!tab) {
      snprintf(msg, msg_size, "out of memory");
      return -1;
    }
    ft_rope_table(&p->cfg, p->cfg.block, tab, tab + n);
    cudaError_t e1 = cudaMemcpy(g->rope_cos, tab, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaError_t e2 = cudaMemcpy(g->rope_sin, tab + n, n * sizeof(float), cudaMemcpyHostToDevice);
    free(tab);
    CK(e1);
    CK(e2);
  }
  CK(cudaMalloc((void **)&g->losses, N * sizeof(double)));
  CK(cudaMalloc((void **)&g->tokens, N * sizeof(int)));
  CK(cudaMalloc((void **)&g->targets_d, N * sizeof(int)));
  return 0;
}

extern "C" int ft_cuda_create(const ft_params *p, int lora_rank, float lora_alpha, unsigned targets, int max_b,
                              ft_cuda **out, char *msg, size_t msg_size) {
  *out = NULL;
  ft_cuda *g = (ft_cuda *)calloc(1, sizeof *g);
  if (!g) {
    snprintf(msg, msg_size, "out of memory");
    return -1;
  }
  if (create(p, lora_rank, lora_alpha, targets, max_b, g, msg, msg_size)) {
    ft_cuda_destroy(g);
    return -1;
  }
  *out = g;
  return 0;
}

extern "C" int ft_cuda_set_lora(ft_cuda *g, const ft_lora *lora, char *msg, size_t msg_size) {
  if (lora->count != g->lora_layout.count) {
    snprintf(msg, msg_size, "CUDA path: the adapter does not match the one the GPU state was made for");
    return -1;
  }
  CK(cudaMemcpy(g->lora, lora->mem, lora->count * sizeof(float), cudaMemcpyHostToDevice));
  return 0;
}

extern "C" int ft_cuda_forward(ft_cuda *g, int use_lora, const int *tokens, const int *targets, int b, int t,
                               double *loss_out, char *msg, size_t msg_size) {
  if (b < 1 || b > g->max_b || t < 1 || t > g->cfg.block) {
    snprintf(msg, msg_size, "CUDA path: batch %d x %d does not fit %d x %d", b, t, g->max_b, g->cfg.block);
    return -1;
  }
  int N = b * t;
  g->b = b;
  g->t = t;
  for (int i = 0; i < N; i++)
    g->targets_h[i] = targets ? targets[i] : -1;
  CK(cudaMemcpy(g->tokens, tokens, (size_t)N * sizeof(int), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(g->targets_d, g->targets_h, (size_t)N * sizeof(int), cudaMemcpyHostToDevice));
  if (forward(g, use_lora, b, t, msg, msg_size)) return -1;
  double *losses = (double *)malloc((size_t)N * sizeof(double));
  if (!losses) {
    snprintf(msg, msg_size, "out of memory");
    return -1;
  }
  cudaError_t e = cudaMemcpy(losses, g->losses, (size_t)N * sizeof(double), cudaMemcpyDeviceToHost);
  double sum = 0.0;
  for (int i = 0; i < N; i++)
    sum += losses[i]; /* in position order, like the CPU path */
  free(losses);
  CK(e);
  *loss_out = sum;
  return 0;
}

extern "C" int ft_cuda_probs(ft_cuda *g, float *host, char *msg, size_t msg_size) {
  CK(cudaMemcpy(host, g->probs, (size_t)g->b * g->t * FT_VOCAB * sizeof(float), cudaMemcpyDeviceToHost));
  return 0;
}

extern "C" int ft_cuda_backward(ft_cuda *g, float loss_scale, char *msg, size_t msg_size) {
  return backward(g, loss_scale, msg, msg_size);
}

extern "C" float *ft_cuda_grad_device(ft_cuda *g) { return g->grad; }

extern "C" int ft_cuda_grad_to_host(ft_cuda *g, float *host, char *msg, size_t msg_size) {
  CK(cudaMemcpy(host, g->grad, (g->lora_layout.count + 1) * sizeof(float), cudaMemcpyDeviceToHost));
  return 0;
}

extern "C" int ft_cuda_grad_from_host(ft_cuda *g, const float *host, char *msg, size_t msg_size) {
  CK(cudaMemcpy(g->grad, host, (g->lora_layout.count + 1) * sizeof(float), cudaMemcpyHostToDevice));
  return 0;
}
