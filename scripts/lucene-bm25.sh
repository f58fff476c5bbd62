#!/usr/bin/env bash
# Lucene, the reference of BenchmarkLexicalSearch100k (ANNA_BENCH_LUCENE=1):
# Lucene 9.12.3's two jars from Maven Central (SHA-256 pinned below) under
# $ANNA_HOME/lib/lucene-9.12.3, benchmarks/lucene/LuceneBM25.java compiled
# beside them, run on the JDK on PATH (17 here). Never a dependency of anna.
#
#   scripts/lucene-bm25.sh index CORPUS INDEX_DIR   (CORPUS: id<TAB>title terms<TAB>text terms)
#   scripts/lucene-bm25.sh search INDEX_DIR QUERIES (one query's terms a line)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ANNA_HOME=${ANNA_HOME:-$HOME/.cache/anna}
V=9.12.3
LIB=$ANNA_HOME/lib/lucene-$V
declare -A SHA256=(
	[lucene-core]=b64a3f8098a7572034fb30085cdee01b34ec81fb0e5a31b471536af58dc6c01b
	[lucene-analysis-common]=fa571bd7caf0f0b4faf46a72ca004a7836f348c31d92bd522dddcc3d128d287e
)
mkdir -p "$LIB"
cp=""
for a in lucene-core lucene-analysis-common; do
	jar=$LIB/$a-$V.jar
	if ! echo "${SHA256[$a]}  $jar" | sha256sum -c --status 2>/dev/null; then
		echo "lucene-bm25.sh: downloading $a $V" >&2
		curl -fsSL --retry 3 -o "$jar.part" "https://repo1.maven.org/maven2/org/apache/lucene/$a/$V/$a-$V.jar"
		echo "${SHA256[$a]}  $jar.part" | sha256sum -c --status || { echo "lucene-bm25.sh: $a-$V.jar: checksum mismatch" >&2; exit 1; }
		mv "$jar.part" "$jar"
	fi
	cp+="$jar:"
done
src=$ROOT/benchmarks/lucene/LuceneBM25.java
classes=$LIB/classes-$(sha256sum "$src" | cut -c1-12)
if [ ! -f "$classes/LuceneBM25.class" ]; then
	mkdir -p "$classes.part"
	javac -nowarn -cp "$cp" -d "$classes.part" "$src"
	rm -rf "$classes" && mv "$classes.part" "$classes"
fi
exec java -Xms2g -Xmx4g -cp "$classes:$cp" LuceneBM25 "$@"
