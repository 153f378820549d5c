/* rendezvous/client.h: the rank's side of the launcher rendezvous (see docs/formats/rendezvous-wire.md).
 * Used by ftl_init (role "rank") and by the launcher's rank agent (role "agent"). */
#ifndef FTL_RDZV_CLIENT_H
#define FTL_RDZV_CLIENT_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "core/launch_env.h"
#include "ftl/error.h"

typedef struct rz_rdzv_client {
  int fd;
  pthread_mutex_t send_lock; /* sends come from the training thread and the checkpoint writer */
} rz_rdzv_client;

/* Connects and introduces itself. role is "rank" or "agent". For "rank" it then waits for the
 * launcher's verdict until deadline_ms: FTL_OK on "go", FTL_ERR_RDZV with the launcher's reason
 * (which ranks never arrived) on "fail", FTL_ERR_TIMEOUT if no verdict came. */
ftl_err rz_rdzv_client_open(rz_rdzv_client *c, const core_launch_env *env, const char *role, int rank,
                             int64_t deadline_ms, ftl_diag *d);

/* The same, with extra fields for the hello (borrowed; may be NULL). */
ftl_err rz_rdzv_client_open_with(rz_rdzv_client *c, const core_launch_env *env, const char *role, int rank,
                                  const json_t *extra, int64_t deadline_ms, ftl_diag *d);

/* Sends one message (thread-safe). nowait: drop it rather than wait when the socket is full. */
ftl_err rz_rdzv_client_send(rz_rdzv_client *c, json_t *msg_stolen, int nowait, ftl_diag *d);

void rz_rdzv_client_close(rz_rdzv_client *c);

#endif
