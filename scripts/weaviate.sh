#!/usr/bin/env bash
# A Weaviate cluster on loopback for anna's Weaviate backend (internal/index/weaviate):
# the pinned weaviate-server built from the Go module proxy, three nodes on
# 127.0.0.1 with API-key authentication (anonymous access off), telemetry and
# profiling off.
#
#   scripts/weaviate.sh build            build (once) $ANNA_HOME/weaviate/VERSION/weaviate-server
#   scripts/weaviate.sh start DIR        start 3 nodes with their data under DIR, wait until ready
#   scripts/weaviate.sh stop DIR         stop the nodes started with DIR
#   scripts/weaviate.sh node-stop DIR N  kill node N (0, 1, 2) with SIGKILL (crash tests)
#   scripts/weaviate.sh node-start DIR N start node N again
#   scripts/weaviate.sh run DIR CMD...   in a network namespace of its own (loopback only, when
#                                        unshare works): build, start, run CMD, stop
#
# start prints the node URLs; the API key is $ANNA_WEAVIATE_API_KEY when set,
# else a random one written to DIR/api-key (mode 600). CMD under `run` gets
# ANNA_WEAVIATE_URLS (comma-separated), ANNA_WEAVIATE_API_KEY, ANNA_WEAVIATE_DIR
# and ANNA_WEAVIATE_SCRIPT in its environment.
#
# Ports (node i, base WEAVIATE_PORT_BASE, default 18000): HTTP base+i, gRPC
# base+10+i, gossip base+100+2i, data base+101+2i, Raft base+200+2i, Raft RPC
# base+201+2i. HTTP, gossip and Raft bind 127.0.0.1. weaviate-server v1.35.2
# binds gRPC and the cluster's data API to every interface (":port", hard-coded
# in adapters/handlers/grpc/server.go and adapters/handlers/rest/clusterapi/serve.go):
# the data API is protected by a random basic-auth password here and gRPC by the
# API key, and `run` (what `make test-cluster` uses) puts the whole cluster and
# the command in a network namespace whose only interface is loopback, so
# nothing can reach it or leave it.
set -euo pipefail
VERSION=${WEAVIATE_VERSION:-v1.35.2}
ANNA_HOME=${ANNA_HOME:-$HOME/.cache/anna}
BIN_DIR=$ANNA_HOME/weaviate/$VERSION
BIN=$BIN_DIR/weaviate-server
BASE=${WEAVIATE_PORT_BASE:-18000}
NODES=3
GO=${GO:-go}

die() { echo "weaviate.sh: $*" >&2; exit 1; }

build() {
	if [ -x "$BIN" ]; then
		return 0
	fi
	mkdir -p "$BIN_DIR"
	echo "weaviate.sh: building weaviate-server $VERSION from the Go module proxy into $BIN_DIR (a few minutes)" >&2
	GOBIN=$BIN_DIR GOFLAGS=-buildvcs=false "$GO" install "github.com/weaviate/weaviate/cmd/weaviate-server@$VERSION"
	[ -x "$BIN" ] || die "go install did not produce $BIN"
}

http_port() { echo $((BASE + $1)); }
urls() {
	local i out=""
	for ((i = 0; i < NODES; i++)); do
		out+="${out:+,}http://127.0.0.1:$(http_port "$i")"
	done
	echo "$out"
}

api_key() {
	local dir=$1
	if [ -n "${ANNA_WEAVIATE_API_KEY:-}" ]; then
		echo "$ANNA_WEAVIATE_API_KEY"
		return
	fi
	if [ ! -s "$dir/api-key" ]; then
		(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/api-key")
	fi
	cat "$dir/api-key"
}

start_node() {
	local dir=$1 i=$2 key join=""
	key=$(api_key "$dir")
	local cluster_pw
	cluster_pw=$(cat "$dir/cluster-password")
	if [ "$i" -ne 0 ]; then
		join="127.0.0.1:$((BASE + 100))"
	fi
	mkdir -p "$dir/node$i"
	# env -i: nothing of the caller's environment (proxies, cloud
	# credentials) reaches the server.
	env -i PATH=/usr/bin:/bin HOME="$dir/node$i" \
		GOMAXPROCS="${WEAVIATE_GOMAXPROCS:-2}" \
		LOG_LEVEL="${WEAVIATE_LOG_LEVEL:-warning}" \
		DISABLE_TELEMETRY=true \
		GO_PROFILING_DISABLE=true \
		PROMETHEUS_MONITORING_ENABLED=false \
		PERSISTENCE_DATA_PATH="$dir/node$i/data" \
		DEFAULT_VECTORIZER_MODULE=none \
		ENABLE_MODULES= \
		AUTOSCHEMA_ENABLED=false \
		QUERY_DEFAULTS_LIMIT=25 \
		QUERY_MAXIMUM_RESULTS=100000 \
		AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=false \
		AUTHENTICATION_APIKEY_ENABLED=true \
		AUTHENTICATION_APIKEY_ALLOWED_KEYS="$key" \
		AUTHENTICATION_APIKEY_USERS=anna \
		AUTHORIZATION_ADMINLIST_ENABLED=true \
		AUTHORIZATION_ADMINLIST_USERS=anna \
		CLUSTER_HOSTNAME="node$i" \
		CLUSTER_IN_LOCALHOST=true \
		CLUSTER_BIND_ADDR=127.0.0.1 \
		CLUSTER_ADVERTISE_ADDR=127.0.0.1 \
		CLUSTER_GOSSIP_BIND_PORT=$((BASE + 100 + 2 * i)) \
		CLUSTER_DATA_BIND_PORT=$((BASE + 101 + 2 * i)) \
		CLUSTER_JOIN="$join" \
		CLUSTER_BASIC_AUTH_USERNAME=anna-cluster \
		CLUSTER_BASIC_AUTH_PASSWORD="$cluster_pw" \
		GRPC_PORT=$((BASE + 10 + i)) \
		RAFT_PORT=$((BASE + 200 + 2 * i)) \
		RAFT_INTERNAL_RPC_PORT=$((BASE + 201 + 2 * i)) \
		RAFT_JOIN="node0:$((BASE + 200)),node1:$((BASE + 202)),node2:$((BASE + 204))" \
		RAFT_BOOTSTRAP_EXPECT=$NODES \
		"$BIN" --scheme http --host 127.0.0.1 --port "$(http_port "$i")" \
		--read-timeout=600s --write-timeout=600s \
		>>"$dir/node$i.log" 2>&1 &
	echo $! >"$dir/node$i.pid"
}

wait_port() {
	local dir=$1 i=$2 port=$3 deadline=$((SECONDS + 60))
	until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		kill -0 "$(cat "$dir/node$i.pid")" 2>/dev/null || { tail -20 "$dir/node$i.log" >&2; die "node $i exited (log: $dir/node$i.log)"; }
		[ $SECONDS -lt $deadline ] || die "node $i does not listen on $port after 60s (log: $dir/node$i.log)"
		sleep 0.2
	done
}

wait_ready() {
	local dir=$1 i deadline=$((SECONDS + ${WEAVIATE_START_TIMEOUT:-180}))
	for ((i = 0; i < NODES; i++)); do
		[ -f "$dir/node$i.pid" ] || continue
		until curl -sf -o /dev/null "http://127.0.0.1:$(http_port "$i")/v1/.well-known/ready"; do
			local j
			for ((j = 0; j < NODES; j++)); do
				if [ -f "$dir/node$j.pid" ] && ! kill -0 "$(cat "$dir/node$j.pid")" 2>/dev/null; then
					tail -20 "$dir/node$j.log" >&2
					die "node $j exited (log: $dir/node$j.log)"
				fi
			done
			[ $SECONDS -lt $deadline ] || die "node $i not ready after ${WEAVIATE_START_TIMEOUT:-180}s (log: $dir/node$i.log)"
			sleep 1
		done
	done
}

start() {
	local dir=$1 i
	build
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	api_key "$dir" >/dev/null
	[ -s "$dir/cluster-password" ] || (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/cluster-password")
	for ((i = 0; i < NODES; i++)); do
		if [ -f "$dir/node$i.pid" ] && kill -0 "$(cat "$dir/node$i.pid")" 2>/dev/null; then
			die "node $i of $dir is already running (pid $(cat "$dir/node$i.pid")); stop it first"
		fi
		start_node "$dir" "$i"
		if [ "$i" -eq 0 ]; then
			# The others join node 0's gossip port: wait until it listens.
			wait_port "$dir" 0 $((BASE + 100))
		fi
	done
	wait_ready "$dir"
	echo "$(urls)"
}

stop() {
	local dir=$1 i pid
	for ((i = 0; i < NODES; i++)); do
		[ -f "$dir/node$i.pid" ] || continue
		pid=$(cat "$dir/node$i.pid")
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	for ((i = 0; i < NODES; i++)); do
		[ -f "$dir/node$i.pid" ] || continue
		pid=$(cat "$dir/node$i.pid")
		for _ in $(seq 1 30); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$dir/node$i.pid"
	done
}

node_stop() {
	local dir=$1 i=$2
	[ -f "$dir/node$i.pid" ] || die "node $i of $dir is not running"
	kill -KILL "$(cat "$dir/node$i.pid")" 2>/dev/null || true
	rm -f "$dir/node$i.pid"
}

node_start() {
	local dir=$1 i=$2
	start_node "$dir" "$i"
	wait_ready "$dir"
}

run() {
	local dir=$1
	shift
	build
	if [ -z "${ANNA_WEAVIATE_NETNS:-}" ] && unshare -n true 2>/dev/null; then
		# A network namespace of our own: loopback is its only interface.
		ANNA_WEAVIATE_NETNS=1 exec unshare -n bash -c 'ip link set lo up && exec "$0" run "$@"' "$0" "$dir" "$@"
	fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	RUN_DIR=$dir
	trap 'stop "$RUN_DIR"' EXIT
	local u
	u=$(start "$dir")
	echo "weaviate.sh: cluster up at $u${ANNA_WEAVIATE_NETNS:+ (in a loopback-only network namespace)}" >&2
	ANNA_WEAVIATE_URLS=$u ANNA_WEAVIATE_API_KEY=$(api_key "$dir") ANNA_WEAVIATE_DIR=$dir \
		ANNA_WEAVIATE_SCRIPT=$(cd "$(dirname "$0")" && pwd)/$(basename "$0") "$@"
}

cmd=${1:-}
shift || true
case $cmd in
build) build ;;
start) [ $# -eq 1 ] || die "usage: start DIR"; start "$1" ;;
stop) [ $# -eq 1 ] || die "usage: stop DIR"; stop "$1" ;;
node-stop) [ $# -eq 2 ] || die "usage: node-stop DIR N"; node_stop "$1" "$2" ;;
node-start) [ $# -eq 2 ] || die "usage: node-start DIR N"; node_start "$1" "$2" ;;
run) [ $# -ge 2 ] || die "usage: run DIR CMD..."; run "$@" ;;
*) die "usage: $0 build | start DIR | stop DIR | node-stop DIR N | node-start DIR N | run DIR CMD..." ;;
esac
