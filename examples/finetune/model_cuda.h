/* examples/finetune/model_cuda.h: the fine-tune's forward and backward passes on a CUDA GPU.
 *
 * The same Llama decoder and arithmetic as model.c (the CPU path is the reference): the base weights and
 * the adapter are copied to the device, a forward pass computes the masked cross-entropy and
 * keeps the activations, and a backward pass computes the adapter's gradients (the base is
 * frozen: no base weight gradients, so pre-training stays on the CPU path). Every kernel gives
 * each thread one output and sums in a fixed order (no atomics), so results are reproducible run
 * to run on one GPU; they differ from the CPU's in the last bits (other summation order, fused
 * multiply-adds, the GPU's expf), within the tolerance tests/finetune/test_finetune_cuda.c
 * states.
 *
 * Compiled only when CMake finds the CUDA toolkit and a working nvcc (FTL_HAVE_CUDA, target
 * ftl_finetune_cuda, which defines FT_WITH_CUDA for its users). One ft_cuda is used by one thread.
 * All functions return 0 on success and -1 with one sentence in msg (the CUDA error string). */
#ifndef FTL_EXAMPLES_FINETUNE_MODEL_CUDA_H
#define FTL_EXAMPLES_FINETUNE_MODEL_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_cuda ft_cuda;

/* Number of CUDA devices usable (0 without a driver or a device). */
int ft_cuda_device_count(void);

/* Makes device `index` this thread's current device. */
int ft_cuda_select_device(int index, char *msg, size_t msg_size);

/* Uploads the base weights and allocates the adapter and activations for up to max_b sequences
 * of up to p->cfg.block tokens, on the current device. */
int ft_cuda_create(const ft_params *p, int lora_rank, float lora_alpha, unsigned targets, int max_b, ft_cuda **out,
                   char *msg, size_t msg_size);
void ft_cuda_destroy(ft_cuda *g);

/* Copies the adapter's weights (host, same configuration as at create) to the device. */
int ft_cuda_set_lora(ft_cuda *g, const ft_lora *lora, char *msg, size_t msg_size);

/* Forward pass as ft_forward (with the adapter set; use_lora 0: the base alone). *loss_out gets
 * the summed cross-entropy of the scored positions. Unlike ft_forward, logits are computed only at
 * scored positions, also when targets is NULL (then none are: a training and evaluation path). */
int ft_cuda_forward(ft_cuda *g, int use_lora, const int *tokens, const int *targets, int b, int t, double *loss_out,
                    char *msg, size_t msg_size);

/* The probabilities of the last forward pass at scored positions, copied to host [b, t, VOCAB]
 * (rows of unscored positions are zero). */
int ft_cuda_probs(ft_cuda *g, float *host, char *msg, size_t msg_size);

/* Backward pass of the last forward, which must have used the adapter (use_lora 1), for
 * loss * loss_scale: the adapter's gradients are written
 * (not added) to the device gradient buffer, laid out as ft_lora's flat array; its spare last
 * float is left for the caller. */
int ft_cuda_backward(ft_cuda *g, float loss_scale, char *msg, size_t msg_size);

/* The device gradient buffer (count + 1 floats, ft_lora's layout), for a caller that reduces
 * device memory (ftl_allreduce on the NCCL backend). */
float *ft_cuda_grad_device(ft_cuda *g);

/* Copies count + 1 floats between the device gradient buffer and the host. */
int ft_cuda_grad_to_host(ft_cuda *g, float *host, char *msg, size_t msg_size);
int ft_cuda_grad_from_host(ft_cuda *g, const float *host, char *msg, size_t msg_size);

#ifdef __cplusplus
}
#endif
#endif
