#!/usr/bin/env bash
# Creates tests/deploy/.venv with the pinned requirements.txt (check_chart.py's Helm SDK, kubernetes-validate,
# jsonschema, PyYAML). Idempotent: does nothing when the venv exists and its stamp matches requirements.txt
# and the interpreter; otherwise rebuilds the venv from scratch.
# PYTHON overrides the interpreter (default: python3). Needs PyPI; never touches the system site-packages.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
req="$here/requirements.txt"
stamp="$venv/.requirements.sha256"
py="${PYTHON:-python3}"

command -v "$py" >/dev/null 2>&1 || { echo "install.sh: $py not found" >&2; exit 1; }
want="$( { sha256sum "$req" | cut -d' ' -f1; "$py" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

rm -rf "$venv"
if ! "$py" -m venv "$venv" >/dev/null 2>&1; then
  # Debian's own python3 ships venv/ensurepip separately.
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    rm -rf "$venv"
    "$py" -m venv "$venv"
  else
    echo "install.sh: '$py -m venv' failed (install python3-venv)" >&2
    exit 1
  fi
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
"$venv/bin/python" -m pip install --quiet --no-cache-dir -r "$req"
echo "$want" > "$stamp"
echo "tests/deploy: venv ready ($("$venv/bin/python" -c 'import importlib.metadata as m; print("helm-python-sdk", m.version("helm-python-sdk"), "kubernetes-validate", m.version("kubernetes-validate"))'))"
