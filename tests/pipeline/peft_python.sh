# The PEFT export read by an independent Python + numpy program (read_safetensors.py), which
# also reads the example's own adapter.safetensors: names, shapes, dtype and values must match.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
PY=
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "skipped: no python3 with numpy (Debian: python3-numpy)"; exit 77; }
"$PY" "$FTL_SOURCE_DIR/tests/pipeline/read_safetensors.py" final export || fail "the independent reader disagrees"
# A bigger adapter (every target module, two layers) through the same check.
pipeline_tool make-final final2 9 q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj 2 || fail "make-final failed"
pipeline_tool export final2 export2 || fail "export failed"
"$PY" "$FTL_SOURCE_DIR/tests/pipeline/read_safetensors.py" final2 export2 || fail "the independent reader disagrees"
echo ok
