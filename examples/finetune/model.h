/* examples/finetune/model.h: a small byte-level Llama decoder (exactly Hugging Face transformers'
 * LlamaForCausalLM: RMSNorm, rotary embeddings, causal softmax attention, a SwiGLU MLP, no biases,
 * the LM head tied to the token embedding) with frozen base weights and LoRA adapters, in plain C,
 * for the example fine-tune.
 *
 * What is here: the configuration, the base parameters and the adapter as flat float arrays with
 * a table of named tensors (Hugging Face's names, for files, checkpoints and hashing), the forward
 * pass with a masked cross-entropy, the backward pass (gradients of the adapter, and of the base
 * when pre-training), AdamW, and a small deterministic random number generator.
 * What is not: files (base_io.h, adapter_io.h), data (data.h), ranks and checkpoints (state.h),
 * the GPU (model_cuda.h), grouped-query attention (num_key_value_heads is kept as a field and must
 * equal heads), rope scaling.
 *
 * Conventions (Hugging Face's and PEFT's, docs/formats/base-model.md and adapter.md): a linear
 * layer's weight is [out, in] and y = x W^T (no bias); a LoRA adapter on it adds
 * scale * (x A^T) B^T with A [r, in], B [out, r], scale = alpha / r, and B starts at zero so a fresh
 * adapter leaves the base model unchanged. The vocabulary is the 256 byte values (token = byte).
 *
 * Determinism: every loop has a fixed order and no threads, so the same binary on the same inputs
 * gives the same bytes. Nothing here is thread-safe across one ft_model/ft_acts. */
#ifndef FTL_EXAMPLES_FINETUNE_MODEL_H
#define FTL_EXAMPLES_FINETUNE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/core.h"

#define FT_VOCAB 256 /* bytes */
#define FT_MAX_LAYERS 16
#define FT_NAME_MAX 64
#define FT_DEFAULT_RMS_EPS 1e-5
#define FT_DEFAULT_ROPE_THETA 10000.0

/* The linear layers of one decoder layer, in the order of the adapter's tensors. */
typedef enum ft_lin {
  FT_LIN_Q = 0,    /* self_attn.q_proj, C -> C */
  FT_LIN_K = 1,    /* self_attn.k_proj */
  FT_LIN_V = 2,    /* self_attn.v_proj */
  FT_LIN_O = 3,    /* self_attn.o_proj */
  FT_LIN_GATE = 4, /* mlp.gate_proj, C -> intermediate */
  FT_LIN_UP = 5,   /* mlp.up_proj, C -> intermediate */
  FT_LIN_DOWN = 6, /* mlp.down_proj, intermediate -> C */
  FT_LIN_COUNT = 7,
} ft_lin;

/* PEFT's module names, used in --targets, adapter.json and target_modules: "q_proj" ... "down_proj". */
const char *ft_lin_name(ft_lin lin);
/* The module's path inside a decoder layer: "self_attn.q_proj", "mlp.gate_proj"... */
const char *ft_lin_path(ft_lin lin);

/* The configuration. A zero in intermediate, kv_heads, rms_eps or rope_theta means its default
 * (ft_config_resolve), so a caller may name only the shape. */
typedef struct ft_config {
  int block;        /* positions (context length; max_position_embeddings) */
  int layers;       /* num_hidden_layers */
  int heads;        /* num_attention_heads */
  int embd;         /* hidden_size C; a multiple of heads, with an even head size (rotary halves) */
  int intermediate; /* intermediate_size of the SwiGLU MLP; default ft_default_intermediate(embd) */
  int kv_heads;     /* num_key_value_heads; default heads (no GQA: it must equal heads) */
  double rms_eps;   /* rms_norm_eps; default FT_DEFAULT_RMS_EPS */
  double rope_theta; /* rope_theta; default FT_DEFAULT_ROPE_THETA */
} ft_config;

/* 8/3 C rounded up to a multiple of 8 (the SwiGLU MLP keeps about the parameters of a 4C one). */
int ft_default_intermediate(int embd);
/* Fills the defaulted (zero) fields. */
void ft_config_resolve(ft_config *cfg);
/* Equal after resolving both. */
int ft_config_equal(const ft_config *a, const ft_config *b);

/* 0 when cfg (resolved) is usable; otherwise a non-zero value and one sentence in msg. */
int ft_config_check(const ft_config *cfg, char *msg, size_t msg_size);

/* Features in and out of a linear layer. */
int ft_lin_in(const ft_config *cfg, ft_lin lin);
int ft_lin_out(const ft_config *cfg, ft_lin lin);

/* A named tensor: a view into a flat array. */
typedef struct ft_tensor {
  char name[FT_NAME_MAX];
  int ndim; /* 1 or 2 */
  int64_t shape[2];
  float *data; /* borrowed from the owning flat array */
  size_t count;
} ft_tensor;

typedef struct ft_block {
  float *attn_norm;       /* input_layernorm [C] */
  float *w[FT_LIN_COUNT]; /* [out, in] */
  float *mlp_norm;        /* post_attention_layernorm [C] */
} ft_block;

/* Base parameters (or their gradients: same layout). */
typedef struct ft_params {
  ft_config cfg; /* resolved */
  float *embed;  /* model.embed_tokens [VOCAB, C], also the LM head (tie_word_embeddings) */
  ft_block layer[FT_MAX_LAYERS];
  float *norm; /* model.norm [C] */
  float *mem;  /* the flat array; owns everything above. It has count + 1 floats: the spare one
                  lets a caller send a scalar (the loss) in the same allreduce as the gradients. */
  size_t count;
  ft_tensor *tensors; /* named views, in file order: model.embed_tokens.weight, then each layer's
                         input_layernorm, q/k/v/o_proj, post_attention_layernorm, gate/up/down_proj,
                         then model.norm.weight */
  int n_tensors;
} ft_params;

/* 0 on success, -1 out of memory. Zero-filled; p->cfg is cfg resolved. */
int ft_params_create(ft_params *p, const ft_config *cfg);
void ft_params_destroy(ft_params *p);
/* The initialisation from seed: N(0, 0.02) (transformers' initializer_range), the residual
 * projections (o_proj, down_proj) scaled by 1/sqrt(2 layers) as GPT-2 does (it keeps the residual
 * stream's scale while pre-training this small model), norms 1. */
void ft_params_init(ft_params *p, uint64_t seed);

/* The LoRA adapter (or its gradients, or an optimizer moment: same layout). */
typedef struct ft_lora {
  ft_config cfg;
  int rank;
  float alpha;
  unsigned targets;                      /* bit (1 << ft_lin) for each adapted linear layer */
  float *A[FT_MAX_LAYERS][FT_LIN_COUNT]; /* [rank, in]; NULL when not a target */
  float *B[FT_MAX_LAYERS][FT_LIN_COUNT]; /* [out, rank] */
  float *mem;                            /* count + 1 floats, as in ft_params */
  size_t count;
  ft_tensor *tensors; /* model.layers.<l>.<path>.lora_A.weight / lora_B.weight, by layer, then
                         target, A before B */
  int n_tensors;
} ft_lora;

int ft_lora_create(ft_lora *a, const ft_config *cfg, int rank, float alpha, unsigned targets);
void ft_lora_destroy(ft_lora *a);
/* PEFT's default: A ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform with a = sqrt(5)), B = 0. */
void ft_lora_init(ft_lora *a, uint64_t seed);
float ft_lora_scale(const ft_lora *a);
/* Parses "q_proj,v_proj,o_proj" into target bits; 0 on a bad name or an empty list. */
unsigned ft_lora_parse_targets(const char *list);
/* Writes "q_proj,v_proj" for target bits. */
void ft_lora_format_targets(unsigned targets, char *buf, size_t size);

/* The rotary tables of Hugging Face's default rope for positions 0..T-1: cos and sin [T, head/2]
 * (the second half of HF's cat(freqs, freqs) repeats the first), angle = pos * inv_freq[i],
 * inv_freq[i] = 1 / theta^(2i / head), all in float32 as transformers computes them. Both the CPU
 * and the CUDA path use this table. */
void ft_rope_table(const ft_config *cfg, int T, float *cos_out, float *sin_out);

/* Activations of one forward pass, kept for the backward pass, sized for up to max_b sequences. */
typedef struct ft_acts ft_acts;
ft_acts *ft_acts_create(const ft_config *cfg, int lora_rank, int max_b);
void ft_acts_destroy(ft_acts *acts);

/* Forward pass over b sequences of t tokens (t <= block). targets (may be NULL) holds the next
 * byte for each position or -1 where the position is not scored. Logits are computed where a
 * target is given (all positions when targets is NULL). lora may be NULL. Returns the sum of the
 * cross-entropy over scored positions (0 when targets is NULL) and, when n_scored is not NULL,
 * their count. */
double ft_forward(const ft_params *p, const ft_lora *lora, const int *tokens, const int *targets, int b, int t,
                  ft_acts *acts, int64_t *n_scored);

/* The logits of the last forward pass: [b, t, VOCAB]; rows of unscored positions are undefined
 * unless targets was NULL. Borrowed from acts. */
const float *ft_acts_logits(const ft_acts *acts);

/* Backward pass of the last ft_forward on acts, for the loss (sum over scored positions of
 * cross-entropy) * loss_scale. Gradients are added to dparams (NULL: the base is frozen, its
 * weight gradients are not computed) and dlora (NULL: no adapter gradients). */
void ft_backward(const ft_params *p, const ft_lora *lora, ft_params *dparams, ft_lora *dlora, ft_acts *acts,
                 float loss_scale);

/* Per-sequence results of the last forward pass with targets: summed loss and scored count of
 * sequence i, and whether every scored position's argmax equals its target (exact match). */
void ft_sequence_metrics(const ft_acts *acts, int i, double *loss_sum, int *scored, int *exact);

/* The model FLOPs of one training step (a forward and a backward pass) over b sequences of t
 * tokens of which `scored` positions carry a target, as the model's shapes count them: 2 FLOPs per
 * multiply-add of its matrix products (elementwise work, RMSNorm, rotary, softmax, SwiGLU, and the
 * optimizer are not counted: the convention of model FLOPs utilisation). lora_rank and targets: the
 * adapter (0: none); base_trainable: the base's weight gradients are computed too (pre-training).
 * What ftl_step_done_flops is told (docs/gpu.md, "Useful work: MFU"); the formula is in model.c. */
double ft_step_flops(const ft_config *cfg, int lora_rank, unsigned targets, int64_t b, int64_t t, int64_t scored,
                     int base_trainable);

typedef struct ft_adamw {
  float lr, beta1, beta2, eps, weight_decay;
} ft_adamw;

/* One AdamW step (decoupled weight decay) on n parameters; step counts from 1. */
void ft_adamw_update(const ft_adamw *o, float *param, const float *grad, float *m, float *v, size_t n, int64_t step);

/* ftl's generator (xoshiro256**, ftl/core.h): small, fast, and its whole state is 32 bytes that a
 * checkpoint can carry. */
typedef ftl_rng ft_rng;
static inline void ft_rng_seed(ft_rng *r, uint64_t seed) { ftl_rng_seed(r, seed); }
static inline uint64_t ft_rng_next(ft_rng *r) { return ftl_rng_next(r); }
/* Uniform in [0, 1) with 24 bits. */
float ft_rng_uniform(ft_rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t ft_rng_below(ft_rng *r, uint64_t n);
float ft_rng_normal(ft_rng *r);

#endif
