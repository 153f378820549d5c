# `ftl report RUNDIR -o FILE`: one self-contained HTML page (inline CSS and SVG: no script, no
# link, no fetch) about a run of the example fine-tune with one crash and restart; headless
# Chromium opens it offline and its screenshot must not be blank (many colours, a good share of
# non-white pixels: the plots drew). Skipped (77) only where Chromium is not installed.
. "$FTL_SOURCE_DIR/tests/finetune/lib.sh" || exit 1
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "skipped: chromium is not installed (scripts/setup-deps.sh installs it)"; exit 77; }
ARGS=("${FT_ARGS[@]}" --ckpt-every 5 --throttle-ms 30)
FTL_CRASH_AT=mid_shard FTL_CRASH_RANK=1 FTL_CRASH_STEP=20 \
  run_ftl run.out run -n 2 --max-restarts 1 --progress off --run-dir run -- ftl-finetune "${ARGS[@]}"
expect_rc 0 run.out
run_ftl report.out report run -o report.html
expect_rc 0 report.out
[ -s report.html ] || fail "no report.html"
for what in "<svg" "Loss against step" "attempt 0" "attempt 1" "Goodput" "Checkpoint cadence" "polyline"; do
  expect_contains report.html "$what"
done
# Self-contained: nothing to fetch. The only URL is SVG's namespace name, which is never fetched.
grep -o -i -E '<script|<link|<img|<iframe|src=|href=|url\(|@import' report.html && fail "the report refers to outside resources"
grep -o -E 'https?://[^"]*' report.html | grep -v -x 'http://www.w3.org/2000/svg' && fail "the report holds a URL"
python3 - report.html <<'PY' || fail "report.html is not well-formed"
import sys, xml.dom.minidom, re
html = open(sys.argv[1]).read()
# Every SVG block is well-formed XML on its own (the browser would draw a broken one partially).
blocks = re.findall(r"<svg.*?</svg>", html, re.S)
assert len(blocks) >= 4, len(blocks)
for b in blocks:
    xml.dom.minidom.parseString(b)
PY
mkdir profile
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --no-first-run --user-data-dir="$PWD/profile" --screenshot="$PWD/shot.png" \
  --window-size=1200,1600 "file://$PWD/report.html" >chromium.out 2>&1
[ -s shot.png ] || { cat chromium.out; fail "chromium wrote no screenshot"; }
python3 "$FTL_SOURCE_DIR/tests/launcher/png_check.py" shot.png 50 0.04 || fail "the screenshot looks blank"
# For a person to look at: FTL_KEEP_REPORT=DIR keeps the page and its screenshot.
[ -n "${FTL_KEEP_REPORT:-}" ] && mkdir -p "$FTL_KEEP_REPORT" && cp report.html shot.png "$FTL_KEEP_REPORT"/
run_ftl none.out report nowhere -o x.html
expect_rc 2 none.out
expect_no_leftovers
echo ok
