#!/usr/bin/env bash
# Makes the PDFs pdfcompare reads: the first 40,000 bytes of three papers
# of ../shared/papers printed by headless Chromium (pandoc's HTML), by
# LibreOffice (pandoc's ODT) and by groff + Ghostscript, each beside its
# source text (pNNN.txt). Usage: make-corpus.sh OUT_DIR
set -euo pipefail
out=$1
mkdir -p "$out"
papers=$(cd "$(dirname "$0")/../../../shared/papers" && pwd)
cd "$out"
for i in 000 001 002; do
	head -c 40000 "$papers"/${i}_*.txt >p$i.txt
	sed 's/[*_#`<>\\]/ /g' p$i.txt >p$i.md
	pandoc -s p$i.md -o p$i.html --metadata title="Paper $i"
	chromium --headless --no-sandbox --disable-gpu --no-pdf-header-footer --print-to-pdf=chromium-$i.pdf p$i.html 2>/dev/null
	pandoc p$i.md -o p$i.odt
	soffice --headless --convert-to pdf --outdir lo p$i.odt >/dev/null 2>&1 && mv lo/p$i.pdf libreoffice-$i.pdf
	(echo ".TL"; echo "Paper $i"; echo ".PP"; sed -e 's/^\([.'"'"']\)/\\\&\1/' -e 's/^[[:space:]]*$/.PP/' p$i.txt) >p$i.ms
	groff -k -ms -Tps p$i.ms 2>/dev/null | ps2pdf - ghostscript-$i.pdf
done
