# tests/install/lib.sh: what the install tests share. Sourced after tests/launcher/lib.sh.

# build_with_find_package PREFIX [CFLAGS]: builds tests/install/prog.c as an outside CMake project
# would, with find_package(ftl) against the ftl installed under PREFIX, into cm/build/prog-cmake;
# the test fails, showing CMake's output, if it does not build.
build_with_find_package() {
  mkdir -p cm
  cat >cm/CMakeLists.txt <<CM
cmake_minimum_required(VERSION 3.20)
project(prog C)
find_package(ftl 0.1 REQUIRED)
add_executable(prog-cmake $FTL_SOURCE_DIR/tests/install/prog.c)
target_link_libraries(prog-cmake PRIVATE ftl::ftl)
CM
  cmake -S cm -B cm/build -DCMAKE_PREFIX_PATH="$1" -DCMAKE_C_FLAGS="${2:-}" >cm.log 2>&1 &&
    cmake --build cm/build >>cm.log 2>&1 || { cat cm.log >&2; fail "prog.c did not build with find_package(ftl) against $1"; }
}

# expect_prog_runs FTL PROG: FTL (an installed ftl) runs PROG (prog.c built one way) on 2 ranks in
# rd-NAME (NAME: PROG's file name), output in NAME.out: it exits 0 and both ranks report success.
expect_prog_runs() {
  local ftl=$1 prog=$2 name r
  name=$(basename "$prog")
  "$ftl" run -n 2 --run-dir "rd-$name" -- "$prog" >"$name.out" 2>&1
  RC=$?
  expect_rc 0 "$name.out"
  for r in 0 1; do
    expect_contains "rd-$name/attempt-0000/rank-0000$r.out" "prog ok rank $r of 2, sum 3, restored step 1"
  done
}
