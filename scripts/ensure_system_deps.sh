#!/usr/bin/env bash
# Installs what the suite needs from outside PyPI: Node.js (CDK synth runs on jsii) with npm (`make node-deps`
# installs pyodide, which compiles the layers' bytecode) and Chromium (the approval page's browser test drives
# Debian's /usr/bin/chromium through Playwright).
# Idempotent; uses Debian's packages (CI runs as root on a fresh machine).
set -euo pipefail
# One at a time: `make test` runs this (system-deps) beside node-deps, which runs it too when npm is missing; the
# second waits here, then finds everything installed.
if command -v flock >/dev/null 2>&1; then exec {lock}<"$0" && flock "$lock"; fi

need=()
command -v node >/dev/null 2>&1 || need+=(nodejs)
# Debian's nodejs comes without npm (NodeSource's includes it).
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ! -x /usr/bin/chromium ]; then
  # Only root installs it; elsewhere the browser test skips and says why.
  if [ "$(id -u)" -eq 0 ]; then need+=(chromium); else echo "note: /usr/bin/chromium is missing (run as root to install it)" >&2; fi
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${need[*]} (run as root or install them)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
