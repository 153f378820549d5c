/* pipeline/hf_cache.h: a fetched version's base model made findable by the name its adapter gives
 * it. A PEFT adapter names its base in adapter_config.json (base_model_name_or_path), and
 * AutoPeftModelForCausalLM.from_pretrained(DIR) loads the base by that name: a folder path is
 * resolved against the loader's working folder, a name through the Hugging Face cache. ftl's
 * exports name a base by its content ("ftl-finetune-base-<hash>", "ftl-base-<digest>"), and
 * `ftl registry fetch` registers the version's base/ under that name in the cache (snapshot links
 * to the fetched files, as the cache's own entries are links to its blobs), so the adapter loads
 * onto its own base from any folder, offline, with its bytes untouched (docs/pipeline.md,
 * "Serving"). Names ftl did not write (a model hub's) are left to transformers. */
#ifndef FTL_PIPELINE_HF_CACHE_H
#define FTL_PIPELINE_HF_CACHE_H

#include <limits.h>
#include <stddef.h>

#include "ftl/error.h"

/* The cache folder transformers reads: $HF_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. FTL_ERR_NOTFOUND without any. */
ftl_err pl_hf_cache_root(char *out, size_t size, ftl_diag *d);

/* Registers dir/base (a fetched version, dir its folder) under the name dir/adapter_config.json
 * gives its base, at revision rev (40 hex digits: the version id's first): name_out and
 * where_out (the cache entry's folder) say where. FTL_ERR_NOTFOUND (d saying why) when there is
 * nothing to register: no base/, no name, or a name ftl did not write. */
ftl_err pl_hf_cache_register(const char *dir, const char *rev, char *name_out, size_t name_size, char *where_out,
                             size_t where_size, ftl_diag *d);

#endif
