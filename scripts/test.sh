#!/usr/bin/env bash
# The README's test command: installs `just` into .tools/ when it is missing (a static
# binary from PyPI, seconds), then runs `just test`, which installs the pinned NVRTC into
# .nvrtc/ on first use. Needs: cargo, python3 with pip, the package registry for the
# first run. No GPU. CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

just_version=1.59.0
if [ "$(.tools/bin/just --version 2>/dev/null)" != "just $just_version" ]; then
  echo "installing just $just_version into .tools/ (pip)" >&2
  rm -rf .tools
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
    --no-warn-script-location --target .tools "rust-just==$just_version"
fi
export PATH="$root/.tools/bin:$PATH"
# The tests compile with the pinned NVRTC only, unless EVO_NVRTC_DIR names another: a
# toolkit elsewhere on the machine must not stand in for it (register counts in the
# snapshots are that release's).
export EVO_NVRTC_DIR="${EVO_NVRTC_DIR:-$root/.nvrtc}"

echo "just $(just --version | cut -d' ' -f2), $(nproc) cores"
start=$SECONDS
just test
echo "just test: $((SECONDS - start)) s"
