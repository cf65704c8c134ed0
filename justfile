# evo's tasks: `just` lists them. `just test` is what CI runs (.ci/run).

set shell := ["bash", "-euo", "pipefail", "-c"]

# The pinned NVRTC that .ci/run installs into .nvrtc/, when present; an
# EVO_NVRTC_DIR already set in the environment wins, and empty means "search"
# (CUDA_HOME, /usr/local/cuda, ...: see crates/codegen/src/toolchain.rs).
export EVO_NVRTC_DIR := env("EVO_NVRTC_DIR", if path_exists(justfile_directory() / ".nvrtc") == "true" { justfile_directory() / ".nvrtc" } else { "" })

# List the recipes
[group('help')]
default:
    @just --list

# Run every test on the CPU (NVRTC compiles, no GPU), then the compile sweep with its summary
[group('test')]
test:
    #!/usr/bin/env bash
    # Both halves always run, so one failure does not hide another; the exit status is the first failure's.
    set -uo pipefail
    tests=0 sweep=0
    cargo test --workspace --no-fail-fast -- --skip nvrtc_sweep_ || tests=$?
    cargo test -p evo-codegen --test compile nvrtc_sweep_ -- --nocapture || sweep=$?
    exit $((tests != 0 ? tests : sweep))

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
compile genome *args:
    cargo run --quiet -- compile {{ genome }} {{ args }}

# Count the valid genomes per device and head dimension (e.g. `just space --target sm_90`)
[group('kernels')]
space *args:
    cargo run --quiet -- space {{ args }}
