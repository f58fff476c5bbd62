#!/usr/bin/env bash
# Times the README's "With nothing but Go" quick start as a new user meets it:
# a clone of this checkout, empty GOMODCACHE, GOCACHE and ANNA_HOME,
# CGO_ENABLED=0, no CGO_LDFLAGS; a folder of N SciFact abstracts as Markdown
# files. Prints a table row per command (docs/results/README.md).
# Usage: scripts/go-only-quickstart.sh [N]   (default 200; needs ../shared)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-200}
W=$(mktemp -d)
trap 'chmod -R u+w "$W" 2>/dev/null; rm -rf "$W"' EXIT
git clone -q "$ROOT" "$W/anna"
mkdir -p "$W/notes"
python3 - "$ROOT/../shared/datasets/scifact/corpus.jsonl" "$W/notes" "$N" <<'PY'
import json, sys
src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i, line in enumerate(open(src)):
    if i >= n:
        break
    d = json.loads(line)
    open(f"{out}/{d['_id']}.md", "w").write(f"# {d['title']}\n\n{d['text']}\n")
PY
export GOMODCACHE=$W/gomod GOCACHE=$W/gocache ANNA_HOME=$W/home CGO_ENABLED=0 GOFLAGS=-modcacherw
unset CGO_LDFLAGS ANNA_ORT_LIB
cd "$W/anna"
row() {
	local what=$1
	shift
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >"$W/out.log" 2>&1 || { cat "$W/out.log"; exit 1; }
	t1=$(date +%s.%N)
	printf '| `%s` | %.1f s |\n' "$what" "$(echo "$t1 - $t0" | bc)"
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
row "go run ./cmd/anna-env setup --pure" go run ./cmd/anna-env setup --pure
row "go build -o annactl ./cmd/annactl" go build -o annactl ./cmd/annactl
row "annactl index --index idx notes/ ($N files)" ./annactl index --index "$W/idx" "$W/notes"
row "annactl search --index idx \"vitamin D and bone density\"" ./annactl search --index "$W/idx" "vitamin D and bone density"
./annactl stats --index "$W/idx" | grep -E '^(model|precision|runtime)'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
