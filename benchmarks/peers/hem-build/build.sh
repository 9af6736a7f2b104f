#!/bin/bash
# Builds the HEM repository's program for benchmarks/peers/hem.py (benchmarks/peers/README.md gives the parameters):
#
#   benchmarks/peers/hem-build/build.sh SOURCE SUBS DIR [BUKS:LEVEL ...]
#
# SOURCE: a checkout of github.com/shiwanghua/HEM at the commit the README names (only its .cpp, .h and
# CMakeLists.txt are read); SUBS: their compile-time number of subscriptions; DIR: the build directory (made
# once per SUBS). Each BUKS:LEVEL (default 1000:13, their README's) leaves one program, DIR/run-b<BUKS>-l<LEVEL>;
# between them CMake recompiles only constant.cpp.
set -euo pipefail
if [ $# -lt 3 ]; then sed -n '2,9p' "$0"; exit 2; fi
src=$1; subs=$2; dir=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
if [ ! -f "$dir/CMakeLists.txt" ]; then
  cp "$src"/*.cpp "$src"/*.h "$src/CMakeLists.txt" "$dir/"
  rm "$dir/test.cpp"  # an unused mainss() that does not compile (no <array>)
  cp "$here/main.cpp" "$dir/main.cpp"
  sed -i 's|^#define DEBUG|// #define DEBUG|' "$dir/constant.h"  # their timing inside the match functions
  sed -i "s|^const int subs = [0-9]*;|const int subs = $subs;|" "$dir/constant.h"
  grep -q "^const int subs = $subs;" "$dir/constant.h" || { echo "constant.h: no subs constant to set" >&2; exit 1; }
  (cd "$dir" && cmake . >/dev/null)
fi
for v in "${@:-1000:13}"; do
  b=${v%%:*}; l=${v##*:}
  sed -i "s|^const int buks = [0-9]*;|const int buks = $b;|; s|^const int level = [0-9]*;|const int level = $l;|" \
    "$dir/constant.cpp"
  (cd "$dir" && make run >/dev/null 2>"$dir/make.err") || { cat "$dir/make.err" >&2; exit 1; }
  cp "$dir/run" "$dir/run-b$b-l$l"
  echo "built $dir/run-b$b-l$l"
done
