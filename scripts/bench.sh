#!/usr/bin/env bash
# The main job: install dependencies, build (Release) and run the benchmark
# harness's default suite. Extra arguments go to `rqspin-bench all`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DRQSPIN_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target rqspin-bench
mkdir -p out
./build-bench/bench/rqspin-bench all --json out/bench.json --csv out/bench.csv \
  --plot out/bench.png "$@"
