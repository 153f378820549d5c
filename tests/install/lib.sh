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
