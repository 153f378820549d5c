/* pipeline/pipeline_cli.c: `ftl export`, `ftl registry`, `ftl promote`, `ftl rollback`
 * (pipeline_cli.h, docs/cli.md). Each handler parses its own arguments (getopt_long), calls the
 * library and turns its ftl_err into an exit code: 0, 1 (failed, reason on stderr), 2 (usage). */
#include "pipeline/pipeline_cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "ftl/core.h"
#include "pipeline/package.h"
#include "pipeline/peft.h"
#include "pipeline/hf_cache.h"
#include "pipeline/registry.h"
#include "pipeline/verdict_sign.h"

const char pl_export_help[] =
    "ftl export: the run's final adapter in PEFT's layout (docs/formats/peft-export.md).\n"
    "\n"
    "  ftl export RUNDIR [-o DIR] [--base-name NAME] [--base | --base-file FILE]\n"
    "\n"
    "Reads RUNDIR/final (refused without a valid commit marker, final/COMMIT) and writes\n"
    "adapter_model.safetensors and adapter_config.json into DIR (default RUNDIR/export): PEFT's\n"
    "LoRA for a Hugging Face LlamaForCausalLM (base_model.model.model.layers.N.self_attn.q_proj...).\n"
    "--base also writes the base model as a Hugging Face folder DIR/base/ (config.json,\n"
    "model.safetensors, tokenizer.json, tokenizer_config.json, special_tokens_map.json), taken\n"
    "from the run's snapshot (the input the gate names as its base; its SHA-256 must still match);\n"
    "--base-file FILE takes it from FILE instead. Either way the base's content hash must be the one\n"
    "the adapter was trained on.\n"
    "--base-name sets base_model_name_or_path (default ftl-finetune-base-<base model hash>); vLLM\n"
    "wants it to equal the served base model's name.\n"
    "Exit codes: 0 written, 1 refused or failed (the reason on stderr), 2 usage.\n";

const char pl_registry_help[] =
    "ftl registry: the adapter registry, a folder (docs/formats/registry.md).\n"
    "\n"
    "  ftl registry ls [NAME]                     adapters, their versions and channels\n"
    "  ftl registry routes [--channel C]          one vLLM --lora-modules NAME@CHANNEL=PATH per channel\n"
    "                                             (the version unpacked and verified on first use)\n"
    "  ftl registry fetch NAME@VERSION|NAME@CHANNEL DIR   unpack a version, verified, into a new DIR; its base/ goes\n"
    "                                                     in the Hugging Face cache under the name its adapter gives\n"
    "                                                     it (--no-hf-cache: not), so PEFT loads it from any folder\n"
    "  ftl registry check NAME                    every stored package byte for byte, served folders hold\n"
    "                                             exactly their files, pointers equal the audit log's moves\n"
    "  ftl registry publish NAME PACKAGE [--channel C] [--why TEXT] [--signature SIG | --unverified]\n"
    "                                             store a package built elsewhere: its verdict must be signed\n"
    "                                             by a trusted gate key (SIG, default PACKAGE.sig), or\n"
    "                                             --unverified, which ls and the audit log show forever\n"
    "  ftl registry keygen OUT                    a gate key pair: OUT.key (private, 0600), OUT.pub\n"
    "  ftl registry sign-verdict --key KEY VERDICT PACKAGE|ADAPTER_DIR [-o SIG]\n"
    "                                             sign a verdict for that adapter (SIG default PACKAGE.sig,\n"
    "                                             or VERDICT.sig for a folder); docs/formats/verdict-signature.md\n"
    "  ftl registry trust KEY.pub                 trust a gate key: REGISTRY/keys/trusted/<key id>.pub\n"
    "                                             (rotation: trust the new key, then remove the old file)\n"
    "\n"
    "Every command takes --registry DIR (default $FTL_REGISTRY), --who TEXT (default USER@HOST: the\n"
    "effective user's login name, or its uid, and this host) and --lock-timeout-ms MS (default 30000).\n"
    "VERSION is an id or a unique prefix of 8+ hex digits.\n"
    "Exit codes: 0 success, 1 failed (the reason on stderr), 2 usage.\n";

const char pl_promote_help[] =
    "ftl promote: point a channel at a published version.\n"
    "\n"
    "  ftl promote NAME VERSION --to CHANNEL [--why TEXT] [--registry DIR] [--who TEXT]\n"
    "\n"
    "The version must be complete in the registry; the channel's pointer is replaced atomically under\n"
    "the registry's lock and the move is appended to NAME/audit.jsonl.\n"
    "Exit codes: 0 success, 1 failed, 2 usage.\n";

const char pl_rollback_help[] = "ftl rollback: move a channel back to the version it pointed at before.\n"
                                 "\n"
                                 "  ftl rollback NAME --channel CHANNEL [--why TEXT] [--registry DIR] [--who TEXT]\n"
                                 "\n"
                                 "Repeated rollbacks walk further back through the channel's history.\n"
                                 "Exit codes: 0 success, 1 failed (or nothing to roll back to), 2 usage.\n";

static int usage(const char *text) {
  fprintf(stderr, "usage: %s\n", text);
  return 2;
}

static int fail(const char *what, ftl_err rc, const ftl_diag *d) {
  fprintf(stderr, "ftl %s: %s (%s)\n", what, d->msg[0] ? d->msg : ftl_strerror(rc), ftl_err_name(rc));
  return 1;
}

int pl_cmd_export(int argc, char **argv) {
  static const char *use = "ftl export RUNDIR [-o DIR] [--base-name NAME] [--base | --base-file FILE]";
  static const struct option opts[] = {{"out", required_argument, NULL, 'o'},
                                       {"base-name", required_argument, NULL, 'b'},
                                       {"base", no_argument, NULL, 'B'},
                                       {"base-file", required_argument, NULL, 'F'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *out = NULL;
  pl_peft_opts po = {0};
  int c;
  optind = 0; /* 0, not 1: glibc then also forgets the state of an earlier getopt scan */
  while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
    if (c == 'o')
      out = optarg;
    else if (c == 'b')
      po.base_model_name = optarg;
    else if (c == 'B')
      po.with_base = 1;
    else if (c == 'F')
      po.base_path = optarg;
    else if (c == 'h') {
      printf("%s\n", use);
      return 0;
    } else
      return usage(use);
  }
  if (optind != argc - 1) return usage(use);
  ftl_diag d = {{0}};
  ftl_err rc = pl_peft_export_run(argv[optind], out, &po, &d);
  if (rc) return fail("export", rc, &d);
  printf("exported %s/final to %s\n", argv[optind], out ? out : "RUNDIR/export");
  return 0;
}

/* --registry DIR / --who / --why, shared by the registry commands. */
typedef struct reg_args {
  pl_registry_ref ref;
  const char *why, *channel, *to, *key, *signature, *out;
  int unverified;
  int no_hf_cache; /* fetch: --no-hf-cache */
} reg_args;

static int parse_reg(int argc, char **argv, reg_args *ra, const char *use) {
  static const struct option opts[] = {
      {"registry", required_argument, NULL, 'r'}, {"who", required_argument, NULL, 'w'},
      {"why", required_argument, NULL, 'y'},      {"channel", required_argument, NULL, 'c'},
      {"to", required_argument, NULL, 't'},       {"lock-timeout-ms", required_argument, NULL, 'l'},
      {"key", required_argument, NULL, 'k'},      {"signature", required_argument, NULL, 's'},
      {"unverified", no_argument, NULL, 'u'},     {"out", required_argument, NULL, 'o'},
      {"no-hf-cache", no_argument, NULL, 'n'},    {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int c;
  memset(ra, 0, sizeof *ra);
  /* Test-only fault injection (FTL_FAULT, core/fs.h) reaches the registry's writes as it reaches
   * the checkpoint's. */
  core_fault_from_env();
  ra->ref.root = pl_registry_root_from_env();
  optind = 0; /* 0, not 1: glibc then also forgets the state of an earlier getopt scan */
  while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
    int64_t v;
    switch (c) {
    case 'r': ra->ref.root = optarg; break;
    case 'w': ra->ref.who = optarg; break;
    case 'y': ra->why = optarg; break;
    case 'c': ra->channel = optarg; break;
    case 't': ra->to = optarg; break;
    case 'k': ra->key = optarg; break;
    case 's': ra->signature = optarg; break;
    case 'u': ra->unverified = 1; break;
    case 'o': ra->out = optarg; break;
    case 'n': ra->no_hf_cache = 1; break;
    case 'l':
      if (ftl_parse_i64(optarg, 1, INT32_MAX, &v)) return usage(use);
      ra->ref.lock_timeout_ms = v;
      break;
    case 'h': printf("%s\n", use); return 0;
    default: return usage(use);
    }
  }
  return -1;
}

static int need_registry(const reg_args *ra) {
  if (ra->ref.root) return 0;
  fprintf(stderr, "ftl: no registry: give --registry DIR or set FTL_REGISTRY\n");
  return 2;
}

int pl_cmd_promote(int argc, char **argv) {
  static const char *use = "ftl promote NAME VERSION --to CHANNEL [--why TEXT] [--registry DIR]";
  reg_args ra;
  int r = parse_reg(argc, argv, &ra, use);
  if (r >= 0) return r;
  if ((r = need_registry(&ra))) return r;
  if (optind != argc - 2 || !ra.to) return usage(use);
  ftl_diag d = {{0}};
  ftl_err rc = pl_registry_promote(&ra.ref, argv[optind], argv[optind + 1], ra.to, ra.why, &d);
  if (rc) return fail("promote", rc, &d);
  printf("%s@%s -> %s\n", argv[optind], ra.to, argv[optind + 1]);
  return 0;
}

int pl_cmd_rollback(int argc, char **argv) {
  static const char *use = "ftl rollback NAME --channel CHANNEL [--why TEXT] [--registry DIR]";
  reg_args ra;
  int r = parse_reg(argc, argv, &ra, use);
  if (r >= 0) return r;
  if ((r = need_registry(&ra))) return r;
  if (optind != argc - 1 || !ra.channel) return usage(use);
  char to[FTL_SHA256_HEX_LEN + 1];
  ftl_diag d = {{0}};
  ftl_err rc = pl_registry_rollback(&ra.ref, argv[optind], ra.channel, ra.why, to, &d);
  if (rc) return fail("rollback", rc, &d);
  printf("%s@%s -> %s (rolled back)\n", argv[optind], ra.channel, to);
  return 0;
}

int pl_cmd_registry(int argc, char **argv) {
  static const char *use =
      "ftl registry ls [NAME] | routes [--channel C] | fetch NAME@VERSION|NAME@CHANNEL DIR | check NAME |\n"
      "       publish NAME PACKAGE [--channel C] [--why TEXT] [--signature SIG | --unverified] | trust KEY.pub |\n"
      "       keygen OUT | sign-verdict --key KEY VERDICT PACKAGE|ADAPTER_DIR [-o SIG]\n"
      "       (the registry commands take --registry DIR, default $FTL_REGISTRY)";
  if (argc < 2) return usage(use);
  if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(pl_registry_help, stdout);
    return 0;
  }
  /* Options may come before or after the subcommand: getopt moves the words to the end. */
  reg_args ra;
  int r = parse_reg(argc, argv, &ra, use);
  if (r >= 0) return r;
  if (optind >= argc) return usage(use);
  const char *sub = argv[optind];
  int n = argc - optind - 1;
  char **pos = argv + optind + 1;
  ftl_diag d = {{0}};
  ftl_err rc;
  /* keygen and sign-verdict work on files only; everything else names a registry. */
  if (!strcmp(sub, "keygen")) {
    char kid[FTL_SHA256_HEX_LEN + 1];
    if (n != 1) return usage(use);
    rc = pl_verdict_keygen(pos[0], kid, &d);
    if (rc) return fail("registry keygen", rc, &d);
    printf("%s.key %s.pub key id %s\n", pos[0], pos[0], kid);
    return 0;
  }
  if (!strcmp(sub, "sign-verdict")) {
    char kid[FTL_SHA256_HEX_LEN + 1], out[4096];
    if (n != 2 || !ra.key) return usage(use);
    struct stat st;
    int is_dir = stat(pos[1], &st) == 0 && S_ISDIR(st.st_mode);
    if (ftl_fmt(out, sizeof out, "%s", ra.out ? ra.out : "") ||
        (!ra.out && ftl_fmt(out, sizeof out, "%s.sig", is_dir ? pos[0] : pos[1]))) {
      fprintf(stderr, "ftl registry sign-verdict: path too long\n");
      return 1;
    }
    rc = pl_verdict_sign(ra.key, pos[0], pos[1], out, kid, &d);
    if (rc) return fail("registry sign-verdict", rc, &d);
    printf("%s (key id %s)\n", out, kid);
    return 0;
  }
  if ((r = need_registry(&ra))) return r;
  if (!strcmp(sub, "trust")) {
    char kid[FTL_SHA256_HEX_LEN + 1];
    if (n != 1) return usage(use);
    rc = pl_verdict_trust(ra.ref.root, pos[0], kid, &d);
    if (rc) return fail("registry trust", rc, &d);
    printf("trusted gate key %s (%s/%s/%s.pub)\n", kid, ra.ref.root, FTL_REGISTRY_TRUSTED_KEYS, kid);
    return 0;
  }
  if (!strcmp(sub, "ls")) {
    if (n > 1) return usage(use);
    rc = pl_registry_list(&ra.ref, n ? pos[0] : NULL, stdout, &d);
  } else if (!strcmp(sub, "routes")) {
    if (n) return usage(use);
    rc = pl_registry_routes(&ra.ref, ra.channel, stdout, stderr, &d);
    if (rc) return 1; /* each failed channel was reported on stderr */
  } else if (!strcmp(sub, "fetch")) {
    char id[FTL_SHA256_HEX_LEN + 1], rev[41], base[256], where[4096];
    if (n != 2) return usage(use);
    rc = pl_registry_fetch(&ra.ref, pos[0], pos[1], id, &d);
    if (!rc) printf("fetched %s into %s\n", pos[0], pos[1]);
    /* The version's base under the name its adapter gives it, in the Hugging Face cache (hf_cache.h). */
    ftl_diag hd = {{0}};
    snprintf(rev, sizeof rev, "%.40s", id);
    if (!rc && !ra.no_hf_cache) {
      ftl_err hrc = pl_hf_cache_register(pos[1], rev, base, sizeof base, where, sizeof where, &hd);
      if (hrc == FTL_OK)
        printf("its base is in the Hugging Face cache as %s (%s): AutoPeftModelForCausalLM.from_pretrained(\"%s\") "
               "loads it from any folder\n",
               base, where, pos[1]);
      else if (hrc == FTL_ERR_NOTFOUND)
        printf("not in the Hugging Face cache: %s\n", hd.msg);
      else
        fprintf(stderr, "ftl registry fetch: warning: the base could not be put in the Hugging Face cache: %s\n", hd.msg);
    }
  } else if (!strcmp(sub, "check")) {
    size_t lines = 0;
    if (n != 1) return usage(use);
    rc = pl_registry_check(&ra.ref, pos[0], &lines, &d);
    if (!rc) printf("%s: consistent (%zu audit records)\n", pos[0], lines);
  } else if (!strcmp(sub, "publish")) {
    char id[FTL_SHA256_HEX_LEN + 1];
    if (n != 2 || (ra.unverified && ra.signature)) return usage(use);
    pl_registry_publish_opts po = {.channel = ra.channel,
                                    .why = ra.why,
                                    .trust = ra.unverified ? FTL_REGISTRY_TRUST_UNVERIFIED : FTL_REGISTRY_TRUST_SIGNED,
                                    .signature_path = ra.signature};
    rc = pl_registry_publish_ex(&ra.ref, pos[0], pos[1], &po, id, &d);
    if (!rc) printf("%s%s\n", id, ra.unverified ? " (UNVERIFIED: recorded as published without a gate signature)" : "");
  } else {
    return usage(use);
  }
  if (rc) return fail("registry", rc, &d);
  return 0;
}
