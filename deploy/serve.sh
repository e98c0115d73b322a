#!/usr/bin/env bash
# Serve Will it fit? with N Streamlit processes behind nginx, on a host without Docker (docs/hosting.md).
#
#   deploy/serve.sh [N]          N processes (default: WIF_PROCESSES, else the number of cores)
#
# Environment (all optional):
#   PYTHON                 the Python with requirements.txt (default: .venv/bin/python if present, else python3)
#   NGINX                  the nginx binary (default: nginx on PATH, /usr/sbin/nginx)
#   WIF_LISTEN             nginx's address:port or port (default 8501)
#   WIF_BASE_PORT          first Streamlit port; processes use BASE, BASE+1, ... on 127.0.0.1 (default 8601)
#   WIF_RUNTIME_DIR        nginx's rendered config, pid, temp files, the processes' logs (default: a temp folder)
#   WIF_EXACT_CACHE_DIR    the exact trace's shared result cache (default: $WIF_RUNTIME_DIR/exact-cache)
#   WIF_RESTART            1 (default): a Streamlit process that exits is started again after 1 s; 0: not
#
# Runs in the foreground until Ctrl-C / SIGTERM, then stops nginx and every process it started.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
N=${1:-${WIF_PROCESSES:-$(nproc 2>/dev/null || echo 2)}}
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "serve.sh: N must be a positive whole number, got '$N'" >&2; exit 2; }
if [[ -z ${PYTHON:-} ]]; then
    if [[ -x $ROOT/.venv/bin/python ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[[ -x $NGINX ]] || { echo "serve.sh: no nginx ($NGINX); on Debian: apt-get install -y nginx" >&2; exit 2; }
LISTEN=${WIF_LISTEN:-8501}
BASE=${WIF_BASE_PORT:-8601}
RESTART=${WIF_RESTART:-1}
RUN=${WIF_RUNTIME_DIR:-$(mktemp -d -t wif-serve.XXXXXX)}
mkdir -p "$RUN"
RUN=$(cd "$RUN" && pwd)
export WIF_EXACT_CACHE_DIR=${WIF_EXACT_CACHE_DIR:-$RUN/exact-cache}
mkdir -p "$WIF_EXACT_CACHE_DIR"

pids=()
cleanup() {
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# One Streamlit process on $1; started again when it exits (unless WIF_RESTART=0).
supervise() {
    local port=$1 child=""
    trap '[[ -n $child ]] && kill -TERM "$child" 2>/dev/null; wait; exit 0' TERM INT
    while :; do
        "$PYTHON" -m streamlit run app.py --server.port "$port" --server.headless true \
            --server.address 127.0.0.1 --browser.gatherUsageStats false >>"$RUN/streamlit-$port.log" 2>&1 &
        child=$!
        echo "$child" >"$RUN/streamlit-$port.pid"
        local rc=0
        wait "$child" || rc=$?
        [[ $RESTART == 1 ]] || exit "$rc"
        echo "serve.sh: the process on port $port exited ($rc); starting it again in 1 s" >&2
        sleep 1
    done
}

servers=""
for ((i = 0; i < N; i++)); do
    port=$((BASE + i))
    supervise "$port" &
    pids+=($!)
    servers+="        server 127.0.0.1:$port max_fails=1 fail_timeout=5s;"$'\n'
done

# Wait for every process's health check before nginx takes traffic.
for ((i = 0; i < N; i++)); do
    port=$((BASE + i))
    for ((t = 0; t < 600; t++)); do
        if "$PYTHON" -c "import sys, urllib.request as u; sys.exit(u.urlopen('http://127.0.0.1:$port/_stcore/health', timeout=1).read().strip() != b'ok')" 2>/dev/null; then
            break
        fi
        sleep 0.2
    done
    ((t < 600)) || { echo "serve.sh: the process on port $port is not healthy; see $RUN/streamlit-$port.log" >&2; exit 1; }
done

mkdir -p "$RUN/nginx"
conf=$RUN/nginx/nginx.conf
awk -v listen="$LISTEN" -v runtime="$RUN/nginx" -v servers="${servers%$'\n'}" '
    /^__UPSTREAM_SERVERS__$/ { print servers; next }
    { gsub(/__LISTEN__/, listen); gsub(/__RUNTIME__/, runtime); print }
' "$ROOT/deploy/nginx.conf.template" >"$conf"
"$NGINX" -t -q -c "$conf" -p "$RUN/nginx" -g 'daemon off;'
echo "serve.sh: $N Streamlit processes on 127.0.0.1:$BASE..$((BASE + N - 1)) behind nginx on $LISTEN (runtime: $RUN)" >&2
"$NGINX" -c "$conf" -p "$RUN/nginx" -g 'daemon off;' &
pids+=($!)
wait "${pids[-1]}"
