#!/usr/bin/env bash
# Installs headless Chromium (Debian's chromium package) for the browser
# test of the search page (server's TestPageInChromium). Idempotent; a
# machine without apt-get (or root) is told so, and the test then skips.
set -euo pipefail
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
	exit 0
fi
if ! command -v apt-get >/dev/null; then
	echo "chromium: no apt-get here; install Chromium to run the page's browser test" >&2
	exit 0
fi
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "chromium: installing Debian's chromium package (the search page's browser test)" >&2
$SUDO apt-get install -y --no-install-recommends chromium >/dev/null ||
	{ $SUDO apt-get update >/dev/null && $SUDO apt-get install -y --no-install-recommends chromium >/dev/null; }
