#!/usr/bin/env bash
# What examples/candle-attention builds with, on a machine without a CUDA toolkit or GPU:
#   .cuda/                       nvcc 13.0 and the CUDA headers from NVIDIA's PyPI wheels
#                                (candle's `cuda` feature compiles its kernels to PTX with
#                                nvcc at build time), and .cuda/env.sh, which points a
#                                build at them;
#   examples/candle-attention/vendor/cudarc-0.19.10
#                                cudarc as published, with the example's
#                                cudarc-dynamic-loading.patch applied (its Cargo.toml says
#                                why).
# Idempotent: what is already in place is kept. Needs python3 with pip, cargo and the
# package registries on first use; no GPU. Then:
#   source .cuda/env.sh && cargo build --release --manifest-path examples/candle-attention/Cargo.toml
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

# CUDA 13.0, not the 13.5 NVRTC pinned for the kernels' tests: candle's kernels are
# PTX that the driver compiles when they load, and PTX from a newer nvcc than the
# driver's CUDA (13.0 on the H100 machines) is refused.
wheels=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-crt==13.0.88
  nvidia-cuda-cccl==13.0.85
)
cudarc_version=0.19.10

cuda_root="$root/.cuda/nvidia/cu13"
if [ "$(cat .cuda/VERSION 2>/dev/null)" != "${wheels[*]}" ]; then
  echo "installing nvcc and the CUDA headers into .cuda/ (pip: ${wheels[*]})" >&2
  rm -rf .cuda
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
    --no-warn-script-location --target .cuda "${wheels[@]}"
  # candle-kernels links `-lcudart`; the wheel ships only the versioned name.
  ln -sf libcudart.so.13 "$cuda_root/lib/libcudart.so"
  cat > .cuda/env.sh <<EOF
# Written by scripts/setup_candle_example.sh: nvcc and CUDA headers for building
# examples/candle-attention (source it in the shell that runs cargo).
export CUDA_HOME="$cuda_root"
export CUDA_ROOT="$cuda_root"
export PATH="$cuda_root/bin:\$PATH"
export LIBRARY_PATH="$cuda_root/lib\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
# The GPU the PTX is for (sm_90: H100, H200); without it candle-kernels asks nvidia-smi.
export CUDA_COMPUTE_CAP="\${CUDA_COMPUTE_CAP:-90}"
EOF
  echo "${wheels[*]}" > .cuda/VERSION
fi
"$cuda_root/bin/nvcc" --version | tail -2 | head -1 >&2

example=examples/candle-attention
cudarc_dir="$example/vendor/cudarc-$cudarc_version"
patch_sum="$(sha256sum "$example/cudarc-dynamic-loading.patch" | cut -d' ' -f1)"
if [ "$(cat "$cudarc_dir/.patched" 2>/dev/null)" != "$patch_sum" ]; then
  cache="${CARGO_HOME:-$HOME/.cargo}/registry/cache"
  find_crate() { find "$cache" -name "cudarc-$cudarc_version.crate" 2>/dev/null | head -1 || true; }
  crate="$(find_crate)"
  if [ -z "$crate" ]; then
    # cargo downloads the crate (checked against the registry's checksum) into its cache.
    fetch="$(mktemp -d)"
    mkdir "$fetch/src" && touch "$fetch/src/lib.rs"
    printf '[package]\nname = "fetch-cudarc"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\ncudarc = { version = "=%s", default-features = false }\n' \
      "$cudarc_version" > "$fetch/Cargo.toml"
    cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
    rm -rf "$fetch"
    crate="$(find_crate)"
    [ -n "$crate" ] || { echo "cargo fetch left no cudarc-$cudarc_version.crate in $cache" >&2; exit 1; }
  fi
  echo "unpacking $(basename "$crate") into $cudarc_dir with cudarc-dynamic-loading.patch" >&2
  rm -rf "$cudarc_dir"
  mkdir -p "$example/vendor"
  tar -xzf "$crate" -C "$example/vendor"
  patch --quiet -p1 -d "$cudarc_dir" < "$example/cudarc-dynamic-loading.patch"
  echo "$patch_sum" > "$cudarc_dir/.patched"
fi
