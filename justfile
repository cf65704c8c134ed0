# evo's tasks: `just` lists them. `just test` is what CI runs (.ci/run).

set shell := ["bash", "-euo", "pipefail", "-c"]

# Pinned: ptxas register counts move between releases, and the snapshots in
# crates/codegen/tests/snapshots/ are this release's.
nvrtc_version := "13.5.37"

# The pinned NVRTC in .nvrtc/ (installed by the `nvrtc` recipe) when present; an
# EVO_NVRTC_DIR already set in the environment wins, and empty means "search"
# (CUDA_HOME, /usr/local/cuda, .nvrtc/ ...: see crates/codegen/src/toolchain.rs).
export EVO_NVRTC_DIR := env("EVO_NVRTC_DIR", if path_exists(justfile_directory() / ".nvrtc") == "true" { justfile_directory() / ".nvrtc" } else { "" })

# List the recipes
[group('help')]
default:
    @just --list

# Evolve kernels: on the GPU if there is one, else replay the recorded H100 landscape (says which on its first line)
[group('search')]
evolve *args:
    cargo run --quiet -- evolve {{ args }}

# Print an experiment's lineage: the evolution path from the root to the champion (e.g. `just lineage experiments/seed-lineage`)
[group('search')]
lineage experiment *args:
    cargo run --quiet -- lineage {{ experiment }} {{ args }}

# Gene-change insights of one or more experiments
[group('search')]
insights +experiments:
    cargo run --quiet -- insights {{ experiments }}

# Compare search strategies on the recorded landscape over 50 seeds
[group('search')]
strategies *args:
    cargo run --quiet -- strategies {{ args }}

# (The GPU recipes use the GPU machine's CUDA toolkit: CUDA_HOME or /usr/local/cuda.)

# Re-measure an experiment's lineage on this GPU: then vs now (default: the seeds' hand evolution)
[group('gpu')]
replay experiment="experiments/seed-lineage" *args:
    cargo run --quiet -- replay {{ experiment }} {{ args }}

# Time the named genomes against the cuBLAS hybrid and PyTorch SDPA on the anchors suite (GPU)
[group('gpu')]
bench *args:
    cargo run --quiet -- bench genomes/*.toml {{ args }}

# Time the champions' backward genomes class by class against PyTorch's cuDNN and flash backward, warm and on a cold L2 (GPU)
[group('gpu')]
bench-backward *args:
    cargo run --quiet -- bench --champions genomes/champions/h100 --backward --cold-l2 {{ args }}

# GREEN then FAST on genomes or hand-written .cu files (GPU), e.g. `just gate genomes/fa2.toml`
[group('gpu')]
gate *args:
    cargo run --quiet -- gate {{ args }}

# Profile one launch with Nsight Compute: occupancy, tensor pipe, throughputs, top stalls (GPU), e.g. `just profile genomes/fa3.toml --problem 2,16,4096,4096,128,f16`
[group('gpu')]
profile *args:
    cargo run --quiet -- profile {{ args }}

# Record an export's champion outputs on this GPU into a snapshot file, or with --check compare this GPU's with it (GPU), e.g. `just snapshot h100.json out/h100 --check`
[group('gpu')]
snapshot file export *args:
    cargo run --quiet -- snapshot {{ file }} --export {{ export }} {{ args }}

# The GPU test set: hand-written adversarial kernels, named genomes, cuBLAS hybrid, ABI errors, the export from C and Python (the README's export_check.py command included), snapshots, the candle example
[group('gpu')]
gpu-test: candle-example-build
    #!/usr/bin/env bash
    set -euo pipefail
    cargo test -p evo-gates --features gpu -- gpu_tests --test-threads=1
    cargo test --features gpu --test integration gpu_export -- --test-threads=1 --nocapture
    cargo test --features gpu --test integration gpu_snapshot -- --test-threads=1 --nocapture
    # examples/candle-attention: its CPU tests, then on an export of the recorded
    # champions its GPU tests and its binary as its README runs it. nvcc's environment
    # (.cuda/env.sh) only from here: the tests above use the machine's CUDA toolkit.
    cargo build --release
    # The backward: both families through the backward gates (the README's command), and
    # a short backward search.
    target/release/evo gate genomes/fa2-bwd.toml genomes/fa3-bwd.toml --time anchors
    target/release/evo evolve --pass backward --problem 1,8,512,512,64,f16 --budget 6 \
      --experiment "$(mktemp -d)/bwd"
    # The champions' backward genomes against PyTorch's backward (the README's command).
    target/release/evo bench --champions genomes/champions/h100 --backward --cold-l2
    # The guided search and `evo tune` (the README's commands, with small budgets).
    target/release/evo evolve --strategy guided --problem 2,16,4096,4096,128,f16 --budget 8 \
      --experiment "$(mktemp -d)/guided"
    target/release/evo tune --model llama-3-8b --prefill 2048 --decode 16x8192 --budget 6 \
      --gpus all --out "$(mktemp -d)/tune"
    target/release/evo tune --problem 1,8,512,512,64,f16 --budget 6 --out "$(mktemp -d)/tune"
    export_dir="$(mktemp -d)/h100"
    target/release/evo export "$export_dir" --champions genomes/champions/h100 --cubin
    source .cuda/env.sh
    cargo test --release --manifest-path examples/candle-attention/Cargo.toml --lib
    EVO_EXPORT_DIR="$export_dir" cargo test --release \
      --manifest-path examples/candle-attention/Cargo.toml --features gpu --test gpu -- --test-threads=1
    examples/candle-attention/target/release/evo-candle-attention "$export_dir" --causal

# compute-sanitizer memcheck, racecheck and synccheck over the named genomes and a seeded sample on small odd shapes (GPU); each must report zero errors and zero hazards
[group('gpu')]
sanitize sample="24" seed="7":
    #!/usr/bin/env bash
    set -uo pipefail
    cargo build --quiet --release
    sanitizer="${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"
    # GREEN only (no timing), on tests/sanitize/suite.toml, no drawn shapes: every launch
    # costs 100x under the tools. The named genomes and {{ sample }} uniformly drawn valid
    # genomes cover the template's paths (P and O in registers or shared memory, every
    # P.V math, split-KV, both families).
    gate=(target/release/evo gate genomes/*.toml --sample {{ sample }} --seed {{ seed }}
          --suite tests/sanitize/suite.toml --drawn 0 --time none)
    status=0
    for tool in memcheck racecheck synccheck; do
      extra=()
      if [ "$tool" = racecheck ]; then extra=(--racecheck-report all); fi
      echo "== $tool"
      "$sanitizer" --tool "$tool" "${extra[@]}" --report-api-errors no --error-exitcode 3 --print-limit 20 "${gate[@]}" \
        > "sanitize-$tool.log" 2>&1
      rc=$?
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|all [0-9]+ kernels passed|kernels failed" "sanitize-$tool.log" | tail -5
      echo "$tool exit status $rc (log: sanitize-$tool.log)"
      [ "$rc" -eq 0 ] || status=$rc
    done
    exit $status

# Measure every genome of a declared sub-space on this GPU (resumes an interrupted run)
[group('gpu')]
landscape plan="experiments/2026-11-23-h100-landscape/plan.toml" out="experiments/2026-11-23-h100-landscape":
    cargo run --quiet -- landscape --plan {{ plan }} --out {{ out }}

# Build examples/candle-attention, the champions as a candle op, with nvcc from PyPI wheels in .cuda/ (no GPU needed)
[group('setup')]
candle-example-build:
    bash scripts/setup_candle_example.sh
    source .cuda/env.sh && cargo build --release --manifest-path examples/candle-attention/Cargo.toml

# Run an export's champion on candle CUDA tensors, checked against candle's f32 attention (GPU), e.g. `just candle-example out/h100 --causal`
[group('gpu')]
candle-example export *args: candle-example-build
    examples/candle-attention/target/release/evo-candle-attention {{ export }} {{ args }}

# Opt-in, as root on a throwaway Debian machine: install Slurm, run 3 islands as a job array on the replay backend, merge, check
[group('test')]
slurm-test run="target/slurm-test":
    scripts/slurm/local-test.sh {{ run }}

# Run every test on the CPU (NVRTC compiles, no GPU), then the compile sweep with its summary
[group('test')]
test: nvrtc
    #!/usr/bin/env bash
    # Both halves always run, so one failure does not hide another; the exit status is the first failure's.
    set -uo pipefail
    export EVO_NVRTC_DIR="${EVO_NVRTC_DIR:-{{ justfile_directory() }}/.nvrtc}"
    tests=0 sweep=0 scripts=0
    # Built first and timed apart, so a slow run says whether the build or the tests grew.
    start=$SECONDS
    cargo test --workspace --no-run || tests=$?
    built=$SECONDS
    cargo test --workspace --no-fail-fast -- --skip nvrtc_sweep_ || tests=$?
    tested=$SECONDS
    # The SDPA baseline's mask rule and flops, which must match the Rust problem's.
    python3 scripts/test_sdpa_baseline.py || scripts=$?
    swept=$SECONDS
    # `--workspace` as above, not `-p evo-codegen`: one package alone unifies fewer
    # features, and the crates under it would be built a second time.
    cargo test --workspace --test compile nvrtc_sweep_ -- --nocapture || sweep=$?
    echo "build $((built - start)) s, tests $((tested - built)) s, NVRTC sweeps $((SECONDS - swept)) s"
    exit $((tests != 0 ? tests : scripts != 0 ? scripts : sweep))

# Check formatting without changing files
[group('test')]
fmt-check:
    cargo fmt --all -- --check

# Lint every target with warnings as errors
[group('test')]
clippy:
    cargo clippy --workspace --all-targets -- -D warnings

# Everything CI should hold: formatting, lints, tests
[group('test')]
ci: fmt-check clippy test

# Compile a genome with NVRTC and print its ptxas report (e.g. `just compile genomes/fa2.toml --arch sm_89`)
[group('kernels')]
compile genome *args: nvrtc
    cargo run --quiet -- compile {{ genome }} {{ args }}

# Count the valid genomes per device and head dimension (e.g. `just space --target sm_90`)
[group('kernels')]
space *args:
    cargo run --quiet -- space {{ args }}

# Install the pinned NVRTC and CUDA headers into .nvrtc/ (no GPU needed; skipped when present)
[group('setup')]
nvrtc:
    #!/usr/bin/env bash
    set -euo pipefail
    cd "{{ justfile_directory() }}"
    # An explicit EVO_NVRTC_DIR elsewhere is the user's choice.
    if [ -n "${EVO_NVRTC_DIR:-}" ] && [ "$EVO_NVRTC_DIR" != "$PWD/.nvrtc" ]; then exit 0; fi
    if [ "$(cat .nvrtc/VERSION 2>/dev/null)" = "{{ nvrtc_version }}" ]; then exit 0; fi
    # A link to a shared install counts when it holds the pinned wheels.
    if ls .nvrtc/nvidia_cuda_nvrtc-{{ nvrtc_version }}.dist-info >/dev/null 2>&1; then exit 0; fi
    echo "installing NVRTC {{ nvrtc_version }} into .nvrtc/ (pip)" >&2
    rm -rf .nvrtc
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
      --no-warn-script-location --target .nvrtc "nvidia-cuda-nvrtc=={{ nvrtc_version }}" \
      "nvidia-cuda-runtime=={{ nvrtc_version }}" "nvidia-cuda-crt=={{ nvrtc_version }}"
    echo "{{ nvrtc_version }}" > .nvrtc/VERSION
