#!/usr/bin/env bash
# ckflow's one entry point. On a fresh Debian 12 machine (as root) each
# command installs what is missing with apt-get, configures and builds with
# CMake, and runs.
#
#   ./run.sh demo    build (Release) and run the example, then inspect its checkpoint
#   ./run.sh test    build with ASan+UBSan and run the whole suite through ctest
#   ./run.sh bench [--report-only]  build (Release), run every benchmark with
#                    TensorFlow and PyTorch side by side (~30 min on 2 cores),
#                    then write bench/README.md from the results (--report-only:
#                    only write it again from the last run's results)
#   ./run.sh reliability  the reliability campaigns (crash points, random kills,
#                    injected faults, soak), then RELIABILITY.md's figures
#   ./run.sh tsan    build with ThreadSanitizer and run the concurrency tests
#   ./run.sh fuzz [SECONDS [TARGET...]]  build the libFuzzer targets (clang) and run each
#                    (checkpoint readers and restores, state file, round trip; or those
#                    named) for SECONDS (default 300), recording its figures;
#                    the same clang build compiles all of the library, distributed/
#                    and the CLI with -Wthread-safety, so a broken locking rule fails it
#   ./run.sh interop [--long]  TensorFlow 2.21 (pinned in a venv under build/)
#                    and ckflow take turns on the same checkpoints (interop/);
#                    --long draws 10,000 random structures per differential test
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
JOBS=${JOBS:-$(nproc)}
# Debian's, whatever PATH says (a pip-installed cmake 4 or a pyenv python may
# come first there).
CMAKE=/usr/bin/cmake
PYTHON=/usr/bin/python3
CTEST=/usr/bin/ctest
# The sanitizer trees (test, tsan, fuzz) keep line tables only: a sanitizer's
# stack trace still names file and line, while full -g made every test binary
# ~300 MB (15 GB for build/test, enough to fill a CI disk) and the build a
# third slower. Debug a single test with full -g in a tree of your own.
SANITIZER_FLAGS="-O1 -g1"

PACKAGES=(build-essential cmake ninja-build ccache pkg-config python3
  libeigen3-dev libprotobuf-dev protobuf-compiler libtbb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libleveldb-dev libsnappy-dev libisal-dev libcli11-dev zlib1g-dev clang-format
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

# Every benchmark of `./run.sh bench`, in order, each writing its results
# into $results (bench/report.py reads them all to write bench/README.md).
# bench_run NAME [VAR=VALUE...] CMD...: runs one and records its command,
# time and exit in $results/runs.jsonl; a failure is recorded, not fatal,
# and its figures read "not run". Roughly, on 2 cores: peers 8 min,
# checkpoint_bench 3, train_bench 4, cnn_bench and cnn_peers 2 each, the
# rest a minute or two each.
bench_run() { "$PYTHON" bench/report.py run "$results" "$@"; }
# gbench NAME ARGS...: a Google Benchmark binary of build/release/bench.
gbench() {
  local name=$1; shift
  bench_run "$name" "build/release/bench/$name" --benchmark_out="$results/$name.json" \
    --benchmark_out_format=json --benchmark_repetitions=3 --benchmark_report_aggregates_only=true "$@"
}
run_benchmarks() {
  local bin=build/release/bench ckflow=build/release/tools/ckflow py=build/venv-bench/bin/python
  rm -rf "$results"
  "$PYTHON" bench/report.py machine "$results" --build build/release
  bench_run peers "$py" bench/tf_side_by_side.py --ckflow "$ckflow" \
    --torch-baseline "$bin/torch_baseline" --repeat 3 --json "$results/peers.json"
  gbench checkpoint_bench --benchmark_filter='Save/.*durable:1|SaveAsync|RestoreSmall/.*cold:1|RestoreOnCreate|RestoreCast|SaveIncremental|DeepModel'
  bench_run save_200k "$ckflow" bench save --count 200000 --size 200000KiB --repeat 3 \
    --json "$results/save_200k.json"
  bench_run restore_200k "$ckflow" bench restore --count 200000 --size 200000KiB --repeat 3 \
    --json "$results/restore_200k.json"
  # The same restore of many small variables with glibc's heap on huge pages.
  bench_run restore_20k_hugetlb GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$ckflow" bench restore \
    --count 20000 --size 20000KiB --repeat 5 --json "$results/restore_20k_hugetlb.json"
  # The same 20,000 trained by Adam: each with its slots m and v.
  bench_run restore_20k_adam "$ckflow" bench restore --optimizer adam --count 20000 \
    --size 20000KiB --repeat 5 --json "$results/restore_20k_adam.json"
  bench_run save_20k_adam "$ckflow" bench save --optimizer adam --count 20000 --size 20000KiB \
    --repeat 5 --json "$results/save_20k_adam.json"
  bench_run save_async_20k "$ckflow" bench save --async --count 20000 --size 20000KiB --repeat 5 \
    --json "$results/save_async_20k.json"
  bench_run memory_async "$ckflow" bench save --async --size 1GiB --count 64 --repeat 1 \
    --memory-saves 10 --json "$results/memory_async.json"
  bench_run fresh_restore "$bin/fresh_restore" --repeat 3 --torch --python "$py" \
    --json "$results/fresh_restore.json"
  # Needs root (it drops the page cache); elsewhere it exits 3, its figures "not run".
  bench_run cold_restore "$bin/fresh_restore" --cold --repeat 3 --tf --torch --python "$py" \
    --json "$results/cold_restore.json"
  bench_run train_bench CKFLOW_BENCH_DIR=/dev/shm CKFLOW_BENCH_LOOP_STEPS=2000 "$bin/train_bench" \
    --benchmark_filter='TrainStep|TorchStep|TrainLoop/model:./async:1/every:100' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_out="$results/train_bench.json" --benchmark_out_format=json
  bench_run train_peers "$py" bench/train_step_peers.py --json "$results/train_peers.json"
  bench_run cnn_bench CKFLOW_BENCH_DIR=/dev/shm "$bin/cnn_bench" --benchmark_out="$results/cnn_bench.json" \
    --benchmark_out_format=json --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
  bench_run cnn_peers "$py" bench/cnn_peers.py --json "$results/cnn_peers.json"
  bench_run sequence_bench CKFLOW_BENCH_DIR=/dev/shm "$bin/sequence_bench" \
    --benchmark_out="$results/sequence_bench.json" --benchmark_out_format=json \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
  bench_run sequence_peers "$py" bench/sequence_peers.py --json "$results/sequence_peers.json"
  # The recommender example, 1,000 steps on its 1 GiB table, with an async
  # save every 100 steps and with only the final one; its log is its figures.
  local recsys every
  for saves in saves nosaves; do
    every=100
    [ "$saves" = nosaves ] && every=0
    recsys="build/release/examples/embedding_recsys --steps 1000 --save-every $every --eval-every 1000"
    rm -rf /dev/shm/ckflow-recsys
    bench_run "recsys_$saves" bash -c \
      "set -o pipefail; $recsys --threads 2 --dir /dev/shm/ckflow-recsys | tee $results/recsys_$saves.log"
  done
  rm -rf /dev/shm/ckflow-recsys
  gbench session_bench
  gbench gemm_isa_bench
  gbench conv_bench
  bench_run conv_peers "$py" bench/conv_peers.py --json "$results/conv_peers.json"
  if [ -x "$bin/gemm_isa_bench_baseline" ]; then gbench gemm_isa_bench_baseline; fi
  if [ -x "$bin/gemm_isa_bench_v3" ]; then gbench gemm_isa_bench_v3; fi
  for mode in sync async; do
    bench_run "soak_$mode" "$bin/checkpoint_soak" --cycles 10000 --mode "$mode" \
      --json "$results/soak_$mode.json"
  done
  if [ -x "$bin/group_bench" ]; then
    bench_run group_merge "$bin/group_bench" merge --max-keys 100000 --json "$results/group_merge.json"
    local root=()
    [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
    for ranks in 1 2 4; do
      bench_run "group_save_$ranks" mpirun "${root[@]}" --oversubscribe -np "$ranks" \
        "$bin/group_bench" save --mib 256 --count 64 --json "$results/group_save_$ranks.json"
    done
  fi
}

export CCACHE_DIR=${CCACHE_DIR:-$ROOT/.ccache}

cmd=${1:-help}
shift || true
case "$cmd" in
  demo)
    # The data set too: the README's Fashion-MNIST commands run the example
    # this build makes.
    install_packages "${PACKAGES[@]}" dataset-fashion-mnist
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
    configure build/test -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$SANITIZER_FLAGS" \
      -DCKFLOW_SANITIZE="address;undefined" -DCKFLOW_BUILD_BENCH=ON
    "$CMAKE" --build build/test -j "$JOBS"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
    cd build/test && "$CTEST" --output-on-failure -j "$JOBS" "$@"
    ;;
  tsan)
    install_packages "${PACKAGES[@]}"
    configure build/tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$SANITIZER_FLAGS" \
      -DCKFLOW_SANITIZE=thread -DCKFLOW_BUILD_BENCH=OFF -DCKFLOW_BUILD_EXAMPLES=OFF
    "$CMAKE" --build build/tsan -j "$JOBS"
    # The log is kept for ./run.sh reliability's TSan row.
    cd build/tsan && "$CTEST" --output-on-failure -j "$JOBS" -R 'Concurren|Parallel|Thread|Session|Async' "$@" \
      2>&1 | tee ctest.log
    ;;
  fuzz)
    # libclang-rt-dev holds libFuzzer; clang only recommends it.
    install_packages "${PACKAGES[@]}" clang libclang-rt-dev
    CC=clang CXX=clang++ configure build/fuzz -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_FLAGS_DEBUG="$SANITIZER_FLAGS" -DCKFLOW_SANITIZE="address;undefined" -DCKFLOW_FUZZ=ON \
      -DCKFLOW_BUILD_BENCH=OFF -DCKFLOW_BUILD_EXAMPLES=ON
    # ckflow_shipped: every library target, distributed/, the CLI and the
    # examples, checked
    # by clang's -Wthread-safety (CMakeLists.txt) beyond what the fuzzers link.
    "$CMAKE" --build build/fuzz -j "$JOBS" --target checkpoint_fuzzer state_fuzzer roundtrip_fuzzer \
      write_seeds fuzz_replay_test ckflow_shipped
    # The replay test's mutations, with stored checksums not checked (as in
    # this build), reach the parsers behind them: LevelDB's block parser
    # once read past a block there (RELIABILITY.md).
    build/fuzz/tests/fuzz/fuzz_replay_test
    seconds=${1:-300}
    shift || true
    targets=("$@")
    [ ${#targets[@]} -eq 0 ] && targets=(checkpoint state roundtrip)
    work=build/fuzz/run
    build/fuzz/tests/fuzz/write_seeds "$ROOT/tests/testdata" "$work/seeds"
    for target in "${targets[@]}"; do
      mkdir -p "$work/corpus/$target" "$work/findings" "$work/results"
      # The seeds, and the corpus kept in the repository (what earlier
      # campaigns found worth keeping, and every finding's input).
      for dir in "$work/seeds/$target" "$ROOT/tests/fuzz/corpus/$target"; do
        if [ -d "$dir" ]; then
          cp -n "$dir"/* "$work/corpus/$target"/
        fi
      done
      flags=()
      # The checkpoint target keeps its structures from input to input
      # (tests/fuzz/restore_targets.h): a leak check after every input that
      # grew them would scan the whole heap (LeakSanitizer checks the
      # corpus replay of the test build instead), and entropic scheduling's
      # bookkeeping of the ~20,000 features one restore touches took half
      # its time.
      [ "$target" = checkpoint ] && flags=(-detect_leaks=0 -entropic=0)
      # Inputs past 32 KiB only slow the mutations down: the structure is in
      # the index, and the data's checks are the same at any length. One
      # process per target owns its corpus folder, so libFuzzer need not
      # re-read it every second (-reload=0). ASan keeps 8 frames of each
      # allocation's and free's stack, not 30: recording deep stacks took a
      # seventh of the checkpoint target's time, and a finding replays with
      # full stacks in the test build (tests/fuzz/CMakeLists.txt). Freed
      # memory waits in a 4 MB quarantine, not ASan's 256 MB: with the
      # default, each allocation got memory (and shadow) long out of the
      # cache, and the checkpoint target slowed from 1,350 to 350 inputs
      # per second over its first 25 minutes; a use after free within the
      # last 4 MB of frees is still caught, and the test build replays the
      # corpus with the full quarantine.
      status=0
      asan="malloc_context_size=8:quarantine_size_mb=4"
      ASAN_OPTIONS="$asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
        build/fuzz/tests/fuzz/${target}_fuzzer "$work/corpus/$target" -max_len=32768 -reload=0 \
        -max_total_time="$seconds" -rss_limit_mb=3072 -malloc_limit_mb=1024 -timeout=20 \
        -artifact_prefix="$work/findings/$target-" -print_final_stats=1 "${flags[@]}" \
        2>&1 | tee "$work/$target.log" || status=$?
      "$PYTHON" bench/report.py fuzz-record "$work/results" "$target" "$work/$target.log" \
        --seconds "$seconds" --findings "$work/findings" --flags "${flags[*]}" \
        --asan-options "$asan"
      [ "$status" -eq 0 ] || exit "$status"
    done
    # A finding stops the script above, its input saved under $work/findings;
    # the fix lands with a unit test that reproduces it, and the input in
    # tests/fuzz/corpus/<target>. `bench/report.py fuzz $work/results` writes
    # the figures into RELIABILITY.md.
    echo "run.sh fuzz: no findings in ${seconds}s per target; corpus kept in $work/corpus"
    ;;
  bench)
    results=build/release/bench-results
    if [ "${1:-}" = "--report-only" ]; then
      install_packages python3 python3-matplotlib
      "$PYTHON" bench/report.py page "$results"
      exit 0
    fi
    install_packages "${PACKAGES[@]}" python3-matplotlib libtorch-dev python3-venv
    make_venv build/venv-bench bench/requirements.txt
    # The examples too: run_benchmarks runs embedding_recsys (and the CLI).
    release_build -DCKFLOW_BUILD_BENCH=ON -DCKFLOW_BUILD_EXAMPLES=ON
    run_benchmarks
    "$PYTHON" bench/report.py page "$results"
    ;;
  reliability)
    # reliability_test in the ASan + UBSan build, with the full random-kill
    # campaign; the soak in the Release build; the TSan row from the log of
    # the last ./run.sh tsan, if there is one.
    install_packages "${PACKAGES[@]}"
    configure build/test -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$SANITIZER_FLAGS" \
      -DCKFLOW_SANITIZE="address;undefined" -DCKFLOW_BUILD_BENCH=ON
    "$CMAKE" --build build/test -j "$JOBS" --target reliability_test save_child
    configure build/release -DCMAKE_BUILD_TYPE=Release -DCKFLOW_BUILD_TESTS=OFF -DCKFLOW_BUILD_BENCH=ON
    "$CMAKE" --build build/release -j "$JOBS" --target checkpoint_soak
    results=build/reliability
    rm -rf "$results"
    "$PYTHON" bench/report.py machine "$results" --build build/test
    campaign="CKFLOW_RANDOM_KILLS=200 build/test/tests/checkpoint/reliability_test"
    bench_run reliability_test bash -c "set -o pipefail; $campaign | tee $results/reliability_test.log"
    for mode in sync async; do
      bench_run "soak_$mode" build/release/bench/checkpoint_soak --cycles 10000 --mode "$mode" \
        --json "$results/soak_$mode.json"
    done
    if [ -f build/tsan/ctest.log ]; then cp build/tsan/ctest.log "$results/tsan.log"; fi
    "$PYTHON" bench/report.py reliability "$results"
    ;;
  interop)
    # --long: then the differential tests (interop/test_differential.py)
    # draw 10,000 structures each instead of 100, in ten processes of 1,000
    # with seeds 1 to 10 (the test's docstring says why).
    long=0
    if [ "${1:-}" = "--long" ]; then
      long=1
      shift
    fi
    install_packages "${PACKAGES[@]}" python3-venv dataset-fashion-mnist
    make_venv "$venv" interop/requirements.txt
    configure build/release -DCMAKE_BUILD_TYPE=Release -DCKFLOW_BUILD_TESTS=OFF \
      -DCKFLOW_BUILD_BENCH=OFF -DCKFLOW_BUILD_INTEROP=ON
    "$CMAKE" --build build/release -j "$JOBS" --target interop_ckflow interop_ops interop_sparse \
      interop_layers interop_transformer interop_cnn ckflow_cli regress fashion_mnist \
      char_transformer embedding_recsys
    # A passed test's temporary files go at once: some are GiBs of checkpoint.
    CKFLOW_BUILD="$ROOT/build/release" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
      -o tmp_path_retention_policy=failed interop "$@"
    if [ "$long" = 1 ]; then
      logs=build/release/differential
      mkdir -p "$logs"
      seq 1 10 | xargs -P "$JOBS" -I{} sh -c 'CKFLOW_DIFFERENTIAL_CASES=1000 \
        CKFLOW_DIFFERENTIAL_SEED={} CKFLOW_BUILD="$1" "$2" -m pytest -q -p no:cacheprovider \
        interop/test_differential.py > "$3/seed-{}.log" 2>&1 ||
        { echo "run.sh interop --long: seed {} failed, see $3/seed-{}.log"; exit 255; }' \
        _ "$ROOT/build/release" "$venv/bin/python" "$logs"
      echo "run.sh interop --long: 10,000 random structures per differential test, no mismatch"
    fi
    ;;
  *)
    sed -n '2,21p' "$0"
    exit 2
    ;;
esac
