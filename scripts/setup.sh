#!/usr/bin/env bash
# Install everything vkdiff needs on a Debian machine; idempotent and quick when nothing is missing.
#   system (apt, when root): mesa-vulkan-drivers (lavapipe), libvulkan1, vulkan-validationlayers (--validate),
#   glslc, spirv-tools, and chromium
#   (headless screenshots of the HTML reports in the tests)
#   python (pip): vkdiff itself, editable, with every pinned dependency of pyproject.toml (judging, both transports,
#   lowering) and the test extras
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(mesa-vulkan-drivers libvulkan1 vulkan-validationlayers glslc spirv-tools chromium)
missing=()
for pkg in "${packages[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "vkdiff setup: apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "vkdiff setup: missing system packages: ${missing[*]} (run: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi

python=${PYTHON:-python3}
if ! "$python" -c "import vkdiff, torch, executorch, torchao, wgpu, vulkan, greenlet, matplotlib, threadpoolctl, pytest, xdist, hypothesis" >/dev/null 2>&1 \
   || ! "$python" -m pip show vkdiff >/dev/null 2>&1; then
  echo "vkdiff setup: pip install -e .[all,test]"
  "$python" -m pip install -q --disable-pip-version-check -e ".[all,test]"
fi
