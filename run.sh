#!/usr/bin/env bash
# ckflow's one entry point. On a fresh Debian 12 machine (as root) each
# command installs what is missing with apt-get, configures and builds with
# CMake, and runs.
#
#   ./run.sh demo    build (Release) and run the example, then inspect its checkpoint
#   ./run.sh test    build with ASan+UBSan and run the whole suite through ctest
#   ./run.sh bench   build (Release) and run the benchmarks, PyTorch and TensorFlow
#                    side by side
#   ./run.sh tsan    build with ThreadSanitizer and run the concurrency tests
#   ./run.sh fuzz [SECONDS]  build the libFuzzer targets (clang) and run each for
#                    SECONDS (default 300): checkpoint readers, state file, round trip;
#                    the same clang build compiles all of the library, distributed/
#                    and the CLI with -Wthread-safety, so a broken locking rule fails it
#   ./run.sh interop  TensorFlow 2.21 (pinned in a venv under build/) and ckflow
#                    take turns on the same checkpoints (interop/)
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
JOBS=${JOBS:-$(nproc)}
# Debian's, whatever PATH says (a pip-installed cmake 4 or a pyenv python may
# come first there).
CMAKE=/usr/bin/cmake
PYTHON=/usr/bin/python3
CTEST=/usr/bin/ctest

PACKAGES=(build-essential cmake ninja-build ccache pkg-config python3
  libeigen3-dev libprotobuf-dev protobuf-compiler libtbb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libleveldb-dev libsnappy-dev libisal-dev libcli11-dev clang-format
  openmpi-bin libopenmpi-dev)

install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "run.sh: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

# configure DIR [cmake args...]
configure() {
  local dir=$1; shift
  "$CMAKE" -S "$ROOT" -B "$dir" -G Ninja "$@" >/dev/null
}

release_build() {
  configure build/release -DCMAKE_BUILD_TYPE=Release -DCKFLOW_BUILD_TESTS=OFF "$@"
  "$CMAKE" --build build/release -j "$JOBS"
}

# make_venv DIR REQUIREMENTS: a venv from Debian's python3 with the pinned
# REQUIREMENTS (and any file it includes with -r), made anew whenever they
# change. build/venv holds interop's (TensorFlow), build/venv-bench adds PyTorch.
make_venv() {
  local dir=$1 requirements=$2 pins
  pins=$(cat "$requirements" interop/requirements.txt)
  if [ "$pins" != "$(cat "$dir/pins" 2>/dev/null)" ]; then
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    "$dir/bin/pip" install -q --disable-pip-version-check -r "$requirements"
    printf '%s' "$pins" > "$dir/pins"
  fi
}
venv=build/venv

export CCACHE_DIR=${CCACHE_DIR:-$ROOT/.ccache}

cmd=${1:-help}
shift || true
case "$cmd" in
  demo)
    install_packages "${PACKAGES[@]}"
    release_build -DCKFLOW_BUILD_BENCH=OFF
    if [ -x build/release/examples/regress ]; then
      build/release/examples/regress --dir runs/regress "$@"
      build/release/examples/regress --dir runs/regress "$@"
      if [ -x build/release/tools/ckflow ] && [ -f runs/regress/checkpoint ]; then
        build/release/tools/ckflow tree runs/regress
      fi
    else
      build/release/examples/hello_graph
    fi
    ;;
  test)
    install_packages "${PACKAGES[@]}"
    configure build/test -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
      -DCKFLOW_SANITIZE="address;undefined" -DCKFLOW_BUILD_BENCH=ON
    "$CMAKE" --build build/test -j "$JOBS"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
    cd build/test && "$CTEST" --output-on-failure -j "$JOBS" "$@"
    ;;
  tsan)
    install_packages "${PACKAGES[@]}"
    configure build/tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
      -DCKFLOW_SANITIZE=thread -DCKFLOW_BUILD_BENCH=OFF -DCKFLOW_BUILD_EXAMPLES=OFF
    "$CMAKE" --build build/tsan -j "$JOBS"
    cd build/tsan && "$CTEST" --output-on-failure -j "$JOBS" -R 'Concurren|Parallel|Thread|Session|Async' "$@"
    ;;
  fuzz)
    # libclang-rt-dev holds libFuzzer; clang only recommends it.
    install_packages "${PACKAGES[@]}" clang libclang-rt-dev
    CC=clang CXX=clang++ configure build/fuzz -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DCKFLOW_SANITIZE="address;undefined" -DCKFLOW_FUZZ=ON \
      -DCKFLOW_BUILD_BENCH=OFF -DCKFLOW_BUILD_EXAMPLES=ON
    # ckflow_shipped: every library target, distributed/, the CLI and the
    # examples, checked
    # by clang's -Wthread-safety (CMakeLists.txt) beyond what the fuzzers link.
    "$CMAKE" --build build/fuzz -j "$JOBS" --target checkpoint_fuzzer state_fuzzer roundtrip_fuzzer \
      write_seeds ckflow_shipped
    seconds=${1:-300}
    work=build/fuzz/run
    build/fuzz/tests/fuzz/write_seeds "$ROOT/../shared/fixtures" "$work/seeds"
    for target in checkpoint state roundtrip; do
      mkdir -p "$work/corpus/$target" "$work/findings"
      if [ -d "$work/seeds/$target" ]; then
        cp -n "$work/seeds/$target"/* "$work/corpus/$target"/
      fi
      # Inputs past 32 KiB only slow the mutations down: the structure is in
      # the index, and the data's checks are the same at any length.
      build/fuzz/tests/fuzz/${target}_fuzzer "$work/corpus/$target" -max_len=32768 \
        -max_total_time="$seconds" -rss_limit_mb=3072 -malloc_limit_mb=1024 -timeout=20 \
        -artifact_prefix="$work/findings/$target-" -print_final_stats=1
    done
    # A finding stops the script above, its input saved under $work/findings;
    # the fix lands with a unit test that reproduces it.
    echo "run.sh fuzz: no findings in ${seconds}s per target; corpus kept in $work/corpus"
    ;;
  bench)
    install_packages "${PACKAGES[@]}" python3-torch python3-matplotlib libtorch-dev python3-venv
    make_venv build/venv-bench bench/requirements.txt
    release_build -DCKFLOW_BUILD_BENCH=ON
    for b in build/release/bench/*_bench; do
      [ -x "$b" ] && "$b" "$@"
    done
    if [ -f bench/side_by_side.py ]; then
      "$PYTHON" bench/side_by_side.py --build build/release
    fi
    build/venv-bench/bin/python bench/tf_side_by_side.py --ckflow build/release/tools/ckflow \
      --json build/release/tf_side_by_side.json
    "$PYTHON" bench/plot_peers.py build/release/tf_side_by_side.json bench/peers.png
    ;;
  interop)
    install_packages "${PACKAGES[@]}" python3-venv
    make_venv "$venv" interop/requirements.txt
    configure build/release -DCMAKE_BUILD_TYPE=Release -DCKFLOW_BUILD_TESTS=OFF \
      -DCKFLOW_BUILD_BENCH=OFF -DCKFLOW_BUILD_INTEROP=ON
    "$CMAKE" --build build/release -j "$JOBS" --target interop_ckflow ckflow_cli regress
    CKFLOW_BUILD="$ROOT/build/release" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
      interop "$@"
    ;;
  *)
    sed -n '2,14p' "$0"
    exit 2
    ;;
esac
