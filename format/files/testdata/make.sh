#!/usr/bin/env bash
# Makes the committed fixtures of package files from handbook.md,
# keepers.csv and report.ms with real producers (Debian: pandoc 2.17,
# LibreOffice 7.4, groff + Ghostscript 10, Python 3's email library).
# Chromium's PDFs are printed by the tests themselves.
set -euo pipefail
cd "$(dirname "$0")"
for f in docx odt epub pptx ipynb; do pandoc handbook.md -s -o handbook.$f; done
out=$(mktemp -d)
soffice --headless --convert-to pdf --outdir "$out" handbook.odt >/dev/null 2>&1
cp "$out/handbook.pdf" handbook-libreoffice.pdf
soffice --headless --convert-to xlsx --outdir "$out" keepers.csv >/dev/null 2>&1
cp "$out/keepers.xlsx" keepers.xlsx
groff -k -ms -Tps report.ms | ps2pdf - report-ghostscript.pdf
# a scanned page: page 1 rendered to an image, the image made a PDF
gs -q -sDEVICE=png16m -r40 -dFirstPage=1 -dLastPage=1 -o "$out/page.png" handbook-libreoffice.pdf
soffice --headless --convert-to pdf --outdir "$out" "$out/page.png" >/dev/null 2>&1
cp "$out/page.pdf" scanned.pdf
# a PDF that needs a password
gs -q -sDEVICE=pdfwrite -sOwnerPassword=owner -sUserPassword=secret -o encrypted.pdf report-ghostscript.pdf
python3 mail.py
rm -rf "$out"
