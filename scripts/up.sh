#!/usr/bin/env bash
# `make up`: home with the embedded defaults, the TUI bridge pair for device `tui`,
# and the TUI in the foreground. Quitting the TUI (Ctrl-C) stops home cleanly.
#
#   scripts/up.sh [DATA_DIR]
#
# DATA_DIR defaults to home's own default: $TETHER_HOME_DIR, else
# $XDG_DATA_HOME/tether/home. If a healthy home already runs there, the TUI
# attaches to it and leaves it running on exit.
#
# The commands this relies on (README "Running home"; docs/architecture.md "Commands"):
#   home up --data-dir DATA_DIR                   (foreground; stops everything on SIGTERM)
#   home status --data-dir DATA_DIR --wait N      (exit 0 once every component is healthy)
#   home schema apply edge_asr_memory --data-dir DATA_DIR   (the agent with its memory reflex)
#   edge tui --data-dir DATA_DIR --device tui     (pairs through the running home, once)
# and, with TETHER_UP_VIA=direct (no bridge: the TUI on home's own NATS), instead of the
# bridge: the `nats_url` key of DATA_DIR/home.json, the running home's state file, and
# `edge tui --direct NATS_URL --data-dir DATA_DIR --device tui`.
#
# Environment: TETHER_UP_TIMEOUT (seconds to wait for a healthy home, default 300),
# TETHER_BRIDGE_PORT (home's SSH endpoint, default 2222), TETHER_UP_SCHEMA (the schema
# applied, default edge_asr_memory), TETHER_UP_VIA (bridge, the
# default, or direct), BIN (the venv's bin, default .venv/bin).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${BIN:-$root/.venv/bin}"
data_dir="${1:-${TETHER_HOME_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/tether/home}}"
device="tui"
schema="${TETHER_UP_SCHEMA:-edge_asr_memory}"
export TETHER_BRIDGE_PORT="${TETHER_BRIDGE_PORT:-2222}"
timeout_s="${TETHER_UP_TIMEOUT:-300}"
via="${TETHER_UP_VIA:-bridge}"
log_dir="$data_dir/logs"
home_pid=""

say() { printf 'up: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

case "$via" in
    bridge | direct) ;;
    *) die "TETHER_UP_VIA must be 'bridge' or 'direct', got '$via'" ;;
esac
for cmd in home edge; do
    [ -x "$bin/$cmd" ] || die "$bin/$cmd is missing: run 'make bootstrap' first"
done

stop_home() {
    # Only the home this script started; an already running one is left alone.
    [ -n "$home_pid" ] || return 0
    if kill -0 "$home_pid" 2>/dev/null; then
        say "stopping home (pid $home_pid)"
        kill -TERM "$home_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$home_pid" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$home_pid" 2>/dev/null; then
            say "home did not stop within 20 s; killing it"
            kill -KILL "$home_pid" 2>/dev/null || true
        fi
    fi
    wait "$home_pid" 2>/dev/null || true
    home_pid=""
}
trap stop_home EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

healthy() { "$bin/home" status --data-dir "$data_dir" --json >/dev/null 2>&1; }

mkdir -p "$data_dir" "$log_dir"

if healthy; then
    say "a healthy home already runs on $data_dir; attaching to it"
else
    say "starting home on $data_dir (log: $log_dir/home-up.log)"
    # Its own session: the terminal's Ctrl-C belongs to the TUI; home gets our SIGTERM.
    setsid "$bin/home" up --data-dir "$data_dir" >"$log_dir/home-up.log" 2>&1 </dev/null &
    home_pid=$!
    deadline=$((SECONDS + timeout_s))
    until healthy; do
        kill -0 "$home_pid" 2>/dev/null \
            || die "home up exited early; the last lines of $log_dir/home-up.log:
$(tail -n 20 "$log_dir/home-up.log" 2>/dev/null)"
        [ "$SECONDS" -lt "$deadline" ] \
            || die "home was not healthy within $timeout_s s (see $log_dir/home-up.log)"
        sleep 0.5
    done
    say "home is healthy"
fi

"$bin/home" schema apply "$schema" --data-dir "$data_dir" >&2

if [ "$via" = direct ]; then
    nats_url="$("$bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["nats_url"])' \
        "$data_dir/home.json")" || die "cannot read the home's nats_url from $data_dir/home.json"
    # --data-dir too: home's bus admits the TUI with that home's admin credentials.
    tui_args=(--direct "$nats_url" --data-dir "$data_dir")
else
    tui_args=(--data-dir "$data_dir")
fi

say "opening the TUI for device '$device' via $via (Ctrl-C quits)"
set +e
"$bin/edge" tui "${tui_args[@]}" --device "$device"
status=$?
set -e
exit "$status"
