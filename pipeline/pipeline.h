/* pipeline/pipeline.h: the adapter pipeline in one include: safetensors files, the final adapter's
 * commit marker, the PEFT export, packages, the registry. See each header. */
#ifndef FTL_PIPELINE_PIPELINE_H
#define FTL_PIPELINE_PIPELINE_H

#include "pipeline/adapter_commit.h"
#include "pipeline/package.h"
#include "pipeline/peft.h"
#include "pipeline/registry.h"
#include "pipeline/safetensors.h"
#include "pipeline/sha256.h"

#endif
