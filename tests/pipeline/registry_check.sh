# `ftl registry check` re-verifies every stored byte (issue 18, item 8): a flipped byte in a stored
# package, another version's package swapped in, a changed or extra file in a served adapter folder
# (a pickle adapter_model.bin, a tokenizer_config.json with a chat template: serving stacks read
# those too), a pointer naming a version that is gone: each is reported, naming the file; serving
# (routes) refuses a served folder with undeclared files. Restored, the registry is consistent.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
use_registry
v1=$(make_package p1.tar.zst one)
v2=$(make_package p2.tar.zst two)
pipeline_tool publish "$REG" chat p1.tar.zst prod >/dev/null || fail "publish v1"
pipeline_tool publish "$REG" chat p2.tar.zst prod >/dev/null || fail "publish v2"
V=$REG/chat/versions
run_ftl out registry check chat
expect_rc 0 out
expect_contains out "consistent"
consistent_again() {
  run_ftl out registry check chat
  expect_rc 0 out
}

# A flipped byte in a stored package (near its end: inside the compressed data).
cp "$V/$v1/package.tar.zst" saved.tar.zst
python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)-20] ^= 1; open(p,"wb").write(b)' \
  "$V/$v1/package.tar.zst"
run_ftl out registry check chat
expect_rc 1 out
expect_contains out "$V/$v1/package.tar.zst is not the package of version ${v1:0:12}"
cp saved.tar.zst "$V/$v1/package.tar.zst"
consistent_again
# Another version's package swapped in.
cp "$V/$v2/package.tar.zst" "$V/$v1/package.tar.zst"
run_ftl out registry check chat
expect_rc 1 out
expect_contains out "is not the package of version ${v1:0:12}"
cp saved.tar.zst "$V/$v1/package.tar.zst"
consistent_again
# A changed byte in a served folder.
A=$V/$v2/adapter
cp "$A/adapter_model.safetensors" st.saved
python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[-1] ^= 1; open(p,"wb").write(b)' \
  "$A/adapter_model.safetensors"
run_ftl out registry check chat
expect_rc 1 out
expect_contains out "adapter_model.safetensors is missing or was changed after unpacking"
cp st.saved "$A/adapter_model.safetensors"
consistent_again
# Files nobody declared in a served folder: check reports them, routes refuses to serve them.
for extra in adapter_model.bin tokenizer_config.json; do
  echo '{"chat_template": "{{ evil }}"}' >"$A/$extra"
  run_ftl out registry check chat
  expect_rc 1 out
  expect_contains out "$A/$extra is not declared in its manifest"
  run_ftl out registry routes
  expect_rc 1 out
  expect_contains out "$extra is not declared in its manifest"
  rm "$A/$extra"
done
consistent_again
run_ftl out registry routes
expect_rc 0 out
expect_contains out "chat@prod=$A"
# fetch gives exactly the declared files too.
run_ftl out registry fetch chat@prod got
expect_rc 0 out
[ "$(ls got | LC_ALL=C sort | tr '\n' ' ')" = "MANIFEST.json adapter_config.json adapter_model.safetensors provenance.json verdict.json " ] ||
  fail "fetch gave $(ls got)"
# A pointer whose history names a version that is gone.
mv "$V/$v1" v1.saved
run_ftl out registry check chat
expect_rc 1 out
expect_contains out "has no version $v1"
mv v1.saved "$V/$v1"
consistent_again
# A stored MANIFEST.json edited (its hash is no longer the id).
cp "$V/$v2/MANIFEST.json" man.saved
chmod u+w "$V/$v2/MANIFEST.json"
echo ' ' >>"$V/$v2/MANIFEST.json"
run_ftl out registry check chat
expect_rc 1 out
expect_contains out "not the version id"
cp man.saved "$V/$v2/MANIFEST.json"
consistent_again
# check of an adapter that does not exist is an error, not "consistent".
run_ftl out registry check ghost
expect_rc 1 out
expect_contains out "no adapter ghost"
echo ok
