# tests/launcher/gpus_cli.sh: `ftl gpus`, this host's GPUs through NVML (here the fake,
# docs/formats/nvml-fake.md) and each one's verdict as the exit code: 0 healthy or no GPU, 6
# degraded, 1 failed; --interval judges what rose between two readings; --json is one object.
. "$(dirname "$0")/lib.sh" || exit 1

cat >healthy.json <<'JSON'
{"version": 1, "devices": [{"readings": [{"uuid": "GPU-1111", "name": "NVIDIA H100 80GB HBM3", "temperature_c": 45, "power_mw": 350000}]},
                           {"readings": [{"uuid": "GPU-2222", "name": "NVIDIA H100 80GB HBM3"}]}]}
JSON
FTL_NVML_FAKE=$PWD/healthy.json run_ftl healthy.out gpus
expect_rc 0 healthy.out
expect_contains healthy.out "GPU 0  GPU-1111  NVIDIA H100 80GB HBM3"
expect_contains healthy.out "temperature 45 C, power 350.0 W"
expect_contains healthy.out "GPU 1  GPU-2222"
[ "$(grep -c 'verdict: healthy' healthy.out)" = 2 ] || fail "both GPUs should be healthy"

cat >hot.json <<'JSON'
{"version": 1, "devices": [{"readings": [{"uuid": "GPU-3333", "throttle": ["hw_thermal"], "temperature_c": 93}]}]}
JSON
FTL_NVML_FAKE=$PWD/hot.json run_ftl hot.out gpus
expect_rc 6 hot.out
expect_contains hot.out "verdict: degraded: thermal throttling"

cat >remap.json <<'JSON'
{"version": 1, "devices": [{"readings": [{"uuid": "GPU-4444", "remapped_rows": {"failure": true}}]}]}
JSON
FTL_NVML_FAKE=$PWD/remap.json run_ftl remap.out gpus --quiet
expect_rc 1 remap.out
[ "$(wc -c <remap.out)" = 0 ] || fail "--quiet printed something"

# A rise is judged only across two readings: one reading of a GPU whose corrected ECC count is high
# is healthy; read twice, 50 apart, it is degraded.
cat >ecc.json <<'JSON'
{"version": 1, "devices": [{"readings": [{"uuid": "GPU-5555", "ecc": {"corrected_volatile": 100}},
                                          {"ecc": {"corrected_volatile": 150}}]}]}
JSON
FTL_NVML_FAKE=$PWD/ecc.json run_ftl ecc1.out gpus
expect_rc 0 ecc1.out
FTL_NVML_FAKE=$PWD/ecc.json run_ftl ecc2.out gpus --interval 50 --json
expect_rc 6 ecc2.out
/usr/bin/python3 - ecc2.out <<'PY' || fail "--json is not the documented object"
import json, sys
doc = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert doc["available"] is True and doc["why"] == "", doc
g = doc["gpus"][0]
assert g["uuid"] == "GPU-5555" and g["verdict"] == "degraded", g
assert "corrected ECC errors rising (+50" in g["reason"], g["reason"]
assert g["ecc"]["corrected_volatile"] == 150, g
PY

echo '{"version": 1, "missing": true}' >missing.json
FTL_NVML_FAKE=$PWD/missing.json run_ftl missing.out gpus
expect_rc 0 missing.out
expect_contains missing.out "GPU health: not available: libnvidia-ml.so.1: cannot open shared object file"
FTL_NVML_FAKE=$PWD/missing.json run_ftl missingj.out gpus --json
expect_rc 0 missingj.out
expect_contains missingj.out '"available":false'
echo '{"version": 1, "init_error": 9}' >nodriver.json
FTL_NVML_FAKE=$PWD/nodriver.json run_ftl nodriver.out gpus
expect_rc 0 nodriver.out
expect_contains nodriver.out "nvmlInit_v2"

run_ftl usage.out gpus --interval soon
expect_rc 2 usage.out
expect_contains usage.out "--interval: 'soon' is not a number of milliseconds"
run_ftl extra.out gpus all
expect_rc 2 extra.out
echo ok
