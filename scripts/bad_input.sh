#!/usr/bin/env bash
# Feeds annactl bad input of every kind and prints a markdown table row per
# case: the input, the first line of what annactl said, and the exit code.
# The README's bad-input table comes from this (bash scripts/bad_input.sh).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=${ANNACTL:-$ROOT/bin/annactl}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
cp "$ROOT/testdata/demo/corpus.jsonl" corpus.jsonl
"$A" index --index idx corpus.jsonl 2>/dev/null

row() { # row DESCRIPTION COMMAND...
	local desc=$1
	shift
	local out code
	# The line that says what is wrong: annactl's own error line on stderr
	# (or the first line matching $SAID, for input that is taken and
	# reported), or for check, the first problem it lists on stdout.
	if [[ $2 == check ]]; then
		out=$("$@" 2>/dev/null | sed -n 's/^  //p' | head -1)
	else
		out=$("$@" 2>&1 >/dev/null | grep "${SAID:-^annactl}" | head -1)
	fi
	"$@" >/dev/null 2>&1
	code=$?
	# Paths under the scratch folder read as relative ones.
	out=${out//$W\//}
	printf '| %s | `%s` | %s |\n' "$desc" "${out//|/\\|}" "$code"
}

echo '| input | what annactl says | exit |'
echo '|---|---|---|'
row '`index --batch -1`' "$A" index --index idx --batch -1 corpus.jsonl
row '`search -k 0`' "$A" search --index idx -k 0 graphs
row '`search --ef -1`' "$A" search --index idx --ef -1 graphs
row 'an empty query' "$A" search --index idx '  '
row '`search --mode bm25`' "$A" search --index idx --mode bm25 graphs
row 'an unknown flag' "$A" index --index idx --bacth 5 corpus.jsonl
row '`eval --modes lexical,foo`' "$A" eval "$ROOT/testdata/demo" --modes lexical,foo
row '`train --lr -1`' "$A" train --input x.jsonl --output ft --lr -1
row '`mine-negatives` without input' "$A" mine-negatives --output m.jsonl
cp -r "$ROOT/testdata/demo" demo
row '`mine-negatives --split` the dataset lacks' "$A" mine-negatives --dataset demo --split train --output m.jsonl
row 'a misspelt command' "$A" serach --index idx graphs
row '`delete` without IDs' "$A" delete --index idx
row '`delete` from a folder that is no index' "$A" delete --index nowhere hnsw
row '`search --query-file` and a query' "$A" search --index idx --query-file q.txt graphs
: >empty.txt
row '`search --query-file` of an empty file' "$A" search --index idx --query-file empty.txt
printf '{"_id": "latin1", "text": "caf\xe9 au lait"}\n' >latin1.jsonl
SAID='^invalid UTF-8' row 'a line that is not UTF-8 (taken, counted)' "$A" index --index idx latin1.jsonl
printf '{"_id": "s", "text": "kept"}\n{"_id": "x", "text": broken\n' >badsync.jsonl
SAID='^--sync' row '`index --sync` of a file with a malformed line (exit 1)' "$A" index --index idx --sync badsync.jsonl
mkdir -p lost/qrels && cp corpus.jsonl "$ROOT/testdata/demo/queries.jsonl" lost/
printf 'query-id\tcorpus-id\tscore\nq01\thnsw\t1\nq02\tnot-in-corpus\t1\n' >lost/qrels/test.tsv
SAID='^positives not in corpus' row 'a qrels row whose document is not in the corpus (skipped, counted)' \
	"$A" mine-negatives --dataset lost --split test --index idx --teacher dense --output lost.jsonl
row 'the same with `--strict`' "$A" mine-negatives --dataset lost --split test --index idx --teacher dense --output lost.jsonl --strict
printf '{"_id": "a", "text": "fine"}\n{"_id": "b", "text": broken\n' >bad.jsonl
row 'a malformed JSON line' "$A" index --index idx bad.jsonl
printf '{"title": "no id", "text": "x"}\n' >noid.jsonl
row 'a document without an ID' "$A" index --index idx noid.jsonl
printf '{"_id": "a", "text": ["not", "a", "string"]}\n' >badtext.jsonl
row 'a text that is not a string' "$A" index --index idx badtext.jsonl
mkdir -p ds/qrels && cp corpus.jsonl ds/ && cp "$ROOT/testdata/demo/queries.jsonl" ds/
printf 'query-id\tcorpus-id\tscore\nq01\thnsw\t0.5\n' >ds/qrels/test.tsv
row 'a qrels grade of 0.5' "$A" eval ds --modes lexical
row '`stats` of a folder that is no index' "$A" stats --index nowhere
cp -r idx empty && : >empty/anna.db
row 'a zero-length anna.db beside indexes' "$A" stats --index empty
cp -r idx gone && rm gone/anna.db
row 'anna.db missing beside indexes' "$A" index --index gone corpus.jsonl
cp -r idx trunc && truncate -s 8192 trunc/anna.db
row 'a truncated anna.db' "$A" search --index trunc graphs
row '`check` of the truncated one' "$A" check --index trunc
cp -r idx flip && python3 - flip/anna.db <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
i = b.find(b'proximity graph')
while i >= 0:  # every copy: bbolt's freed pages keep old ones
    b[i] ^= 0x20
    i = b.find(b'proximity graph', i + 1)
open(p, 'wb').write(b)
PY
row 'a byte flipped in a document record' "$A" search --index flip --mode lexical layered proximity
row '`check` of that one' "$A" check --index flip
mkdir -p badmodel && printf '{"a": 1' >badmodel/config.json
row 'a model folder with a broken config.json' "$A" models import badmodel out
