# The gate as a promise the registry keeps (issue 18, item 1): `ftl registry publish` of a package
# built elsewhere needs a verdict signed by a gate key the registry trusts, bound to that
# package's adapter (a signature moved to another package, an untrusted key, a bad signature and
# a missing one are refused, storing nothing), or --unverified, which `ls` and the audit log show
# for as long as the version exists. Signed or not, local gate or not: a verdict that says failed
# or is not a verdict, random bytes as the weights and a non-JSON config are refused. Then key
# rotation: trust the new key, remove the old, old versions stay, the old key no longer publishes.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
command -v python3 >/dev/null && command -v zstd >/dev/null || { echo "skipped: needs python3 and zstd"; exit 77; }
use_registry
MK="python3 $FTL_SOURCE_DIR/tests/pipeline/mkpackage.py"
nothing_stored() { # ID: no version folder, no temporary left
  [ -e "$REG/chat/versions/$1" ] && fail "version $1 was stored"
  ls -a "$REG/chat/versions" 2>/dev/null | grep -q '^\.tmp-' && fail "a temporary version folder was left"
  return 0
}
v1=$(make_package p1.tar.zst one)
# Another adapter (other weights): a signature binds the verdict to the adapter's files, so p1's
# signature must not pass for it. (The same adapter under another provenance is the same claim.)
pipeline_tool make-final final2 6 >/dev/null || fail "make-final 2 failed"
pipeline_tool export final2 export2 || fail "export 2 failed"
v2=$(pipeline_tool package export2 verdict.json p2.tar.zst two) || fail "package 2 failed"

run_ftl out registry keygen gate
expect_rc 0 out
[ "$(stat -c %a gate.key)" = 600 ] || fail "the private key is not 0600"
run_ftl out registry keygen gate
expect_rc 1 out # never overwrites a key
run_ftl out registry trust gate.pub
expect_rc 0 out
kid=$(ls "$REG/keys/trusted")
kid=${kid%.pub}
[ ${#kid} = 64 ] || fail "trusted key not named by its id: $kid"
grep -q "PRIVATE" "$REG/keys/trusted/$kid.pub" && fail "a private key was stored as trusted"

# A package without a signature is refused, and nothing is stored.
run_ftl out registry publish chat p1.tar.zst
expect_rc 1 out
expect_contains out "has no verdict signature"
nothing_stored "$v1"
# Signed by the trusted key: published, and ls says by which key.
run_ftl out registry sign-verdict --key gate.key verdict.json p1.tar.zst
expect_rc 0 out
[ -f p1.tar.zst.sig ] || fail "no p1.tar.zst.sig"
run_ftl out registry publish chat p1.tar.zst --channel prod
expect_rc 0 out
run_ftl out registry ls chat
expect_contains out "$v1  [prod]  (signed by gate key ${kid:0:12})"
grep -q "\"trust\":\"signed\",\"key_id\":\"$kid\"" "$REG/chat/audit.jsonl" || fail "the publish line lacks its trust"
# The signature of one package moved to another: refused.
cp p1.tar.zst.sig p2.tar.zst.sig
run_ftl out registry publish chat p2.tar.zst
expect_rc 1 out
expect_contains out "the signature is for another"
nothing_stored "$v2"
# A signature that was edited: refused.
python3 - p1.tar.zst.sig bad.sig <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["signature"] = ("0" if s["signature"][0] != "0" else "1") + s["signature"][1:]
open(sys.argv[2], "w").write(json.dumps(s, indent=2, sort_keys=True) + "\n")
PY
run_ftl out registry publish chat p1.tar.zst --signature bad.sig
expect_rc 1 out
expect_contains out "does not verify"
# Signed by a key the registry does not trust: refused.
run_ftl out registry keygen rogue
run_ftl out registry sign-verdict --key rogue.key verdict.json p2.tar.zst
expect_rc 0 out
run_ftl out registry publish chat p2.tar.zst
expect_rc 1 out
expect_contains out "which this registry does not trust"
nothing_stored "$v2"
# A verdict that is not the package's own cannot be signed for it.
printf '{"passed": true, "version": 1, "metric": "exact_match", "value": 1.0}\n' >other-verdict.json
run_ftl out registry sign-verdict --key gate.key other-verdict.json p2.tar.zst -o x.sig
expect_rc 1 out
expect_contains out "is not the verdict.json inside"

# Content checks, whatever vouches for the package.
# bad KIND PKG EXPECTED: refused signed, --unverified and through the local-gate path (ftl publish's).
bad() {
  local kind=$1 pkg=$2 want=$3 id=$4
  ftl registry sign-verdict --key gate.key "$5" "$pkg" >/dev/null 2>&1 # may refuse a non-verdict: then unsigned
  run_ftl out registry publish chat "$pkg"
  expect_rc 1 out
  [ -f "$pkg.sig" ] && expect_contains out "$want"
  run_ftl out registry publish chat "$pkg" --unverified
  expect_rc 1 out
  expect_contains out "$want"
  pipeline_tool publish "$REG" chat "$pkg" >out 2>&1 && fail "$kind: published through the local-gate path"
  expect_contains out "$want"
  nothing_stored "$id"
  echo "refused: $kind"
}
printf '{"passed": false, "version": 1, "metric": "exact_match", "value": 0.1}\n' >failed.json
id=$($MK failed.tar.zst export failed.json) || fail "mkpackage failed"
bad "passed false (signed)" failed.tar.zst '"passed": false' "$id" failed.json
[ -f failed.tar.zst.sig ] || fail "a failed verdict could not be signed (the test needs it signed)"
printf 'this is not a verdict\n' >garbage.json
id=$($MK garbage.tar.zst export garbage.json) || fail "mkpackage failed"
bad "garbage verdict" garbage.tar.zst "is not a verdict" "$id" garbage.json
printf '[1, 2, 3]\n' >array.json
id=$($MK array.tar.zst export array.json) || fail "mkpackage failed"
bad "verdict not an object" array.tar.zst "is not a verdict" "$id" array.json
printf '{"version": 1, "passed": "yes"}\n' >strpassed.json
id=$($MK strpassed.tar.zst export strpassed.json) || fail "mkpackage failed"
bad "passed not a boolean" strpassed.tar.zst "is not a verdict" "$id" strpassed.json
head -c 4096 /dev/urandom >random.bin
id=$($MK random.tar.zst export verdict.json --model random.bin) || fail "mkpackage failed"
bad "random weights" random.tar.zst "adapter_model.safetensors is not a valid safetensors file" "$id" verdict.json
printf 'peft_type = LORA\n' >config.txt
id=$($MK config.tar.zst export verdict.json --config config.txt) || fail "mkpackage failed"
bad "non-JSON config" config.tar.zst "adapter_config.json is not a PEFT config" "$id" verdict.json
# A well-formed package made outside ftl is accepted by the same path (the checks above are what
# refused the others, not the way they were made).
id=$($MK outside.tar.zst export verdict.json) || fail "mkpackage failed"
run_ftl out registry sign-verdict --key gate.key verdict.json outside.tar.zst
run_ftl out registry publish chat outside.tar.zst
expect_rc 0 out

# --unverified: stored, and shown as such for as long as the version exists.
run_ftl out registry publish chat p2.tar.zst --unverified
expect_rc 0 out
expect_contains out "UNVERIFIED"
grep -q "\"to\":\"$v2\",\"why\":\"\",\"trust\":\"unverified\"" "$REG/chat/audit.jsonl" || fail "the audit line does not say unverified"
run_ftl out registry sign-verdict --key gate.key verdict.json p2.tar.zst
run_ftl out registry publish chat p2.tar.zst # signed now: a no-op, the version stays unverified
expect_rc 0 out
run_ftl out registry ls chat
expect_contains out "$v2  (UNVERIFIED: published without a gate signature)"
run_ftl out registry check chat
expect_rc 0 out

# Signing the adapter folder before packaging: the package of that folder and verdict verifies.
run_ftl out registry sign-verdict --key gate.key verdict.json export -o folder.sig
expect_rc 0 out
v3=$(make_package p3.tar.zst three)
run_ftl out registry publish chat p3.tar.zst --signature folder.sig
expect_rc 0 out

# Rotation: trust a new key, remove the old one; old versions stay, the old key no longer works.
run_ftl out registry keygen gate2
run_ftl out registry trust gate2.pub
expect_rc 0 out
rm "$REG/keys/trusted/$kid.pub"
v4=$(make_package p4.tar.zst four)
run_ftl out registry sign-verdict --key gate.key verdict.json p4.tar.zst
run_ftl out registry publish chat p4.tar.zst
expect_rc 1 out
expect_contains out "does not trust"
run_ftl out registry sign-verdict --key gate2.key verdict.json p4.tar.zst
run_ftl out registry publish chat p4.tar.zst
expect_rc 0 out
run_ftl out registry check chat
expect_rc 0 out
run_ftl out registry ls chat
expect_contains out "$v1  [prod]  (signed by gate key ${kid:0:12})"
echo ok
