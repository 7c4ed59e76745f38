#!/usr/bin/env bash
# Bring everything the tests need, then run the whole suite:
#
#     bash tests/run.sh            # extra arguments go to pytest (-k, -x, a file...)
#
# On a fresh Debian machine with only Python: installs the system programs the tests
# drive for real (through apt-get, as root or with sudo) when they are missing, then
# this package with its test extra, then runs pytest with the same Python. Where the
# system Python refuses pip (PEP 668, Debian's own python3), a .venv is made and used.
set -euo pipefail
cd "$(dirname "$0")/.."

# command -> Debian package, for every real program the suite starts.
declare -A PROGRAMS=(
    [nginx]=nginx             # a second, real Range server (tests/nginx.py)
    [tinyproxy]=tinyproxy     # a real forward proxy: http, CONNECT, Basic auth (tests/proxies.py)
)

missing=()
for program in "${!PROGRAMS[@]}"; do
    if ! command -v "$program" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$program" ]; then
        missing+=("${PROGRAMS[$program]}")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "tests/run.sh: install ${missing[*]} with your package manager, then run this again" >&2
        exit 1
    fi
    echo "tests/run.sh: installing ${missing[*]} (apt-get)" >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # Debian's nginx package may start a system nginx on port 80; the tests never use it.
fi

python=${PYTHON:-$(command -v python3 || command -v python)}
managed=$("$python" -c 'import os, sys, sysconfig
print(int(sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))')
if [ "$managed" = 1 ]; then  # PEP 668: the system Python takes no pip installs; use a venv of our own
    if [ ! -x .venv/bin/python ]; then
        "$python" -m venv .venv 2>/dev/null || {
            $([ "$(id -u)" -ne 0 ] && echo sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
            "$python" -m venv .venv
        }
    fi
    python=.venv/bin/python
fi

"$python" -m pip install -q -e '.[test]'
exec "$python" -m pytest "$@"
