# scripts/ctest-lib.sh: what scripts/test.sh and scripts/flake-hunt.sh share about running ctest:
# how many tests run at once, and reading a ctest log back as one line per test. Sourced, never run.
#
# FTL_TEST_JOBS: the tests ctest runs at once (ctest -j). Most tests spend their time waiting on
# real processes (a rank asleep between steps, a detector's timeout, a restart's backoff), so 4 at
# once on 2 cores keeps both busy; the tests that keep both cores busy themselves say so with
# PROCESSORS 2, and what tests really share is serialised with RESOURCE_LOCK
# (tests/CMakeLists.txt, "What tests share"). Every test must pass at this load: a verdict that
# does not hold on a machine twice as slow is a bug (docs/testing.md).
FTL_TEST_JOBS=${FTL_TEST_JOBS:-4}

# ctest_results LOG: one line per test that LOG (ctest's output) reports, tab-separated:
# NAME STATUS SECONDS, STATUS one of passed, failed, skipped, timeout, notrun, crashed.
ctest_results() {
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) [ .]*(\*\*\*)?(Passed|Failed|Skipped|Timeout|Not Run|Exception)[^0-9]*([0-9]+\.[0-9]+) sec.*$/\1\t\3\t\4/p' "$1" |
    awk -F'\t' 'BEGIN { OFS = "\t" }
      { s = tolower($2); if (s == "not run") s = "notrun"; if (s == "exception") s = "crashed"; print $1, s, $3 }'
}
