#!/usr/bin/env bash
# ensure-chromium.sh makes sure Debian's chromium is installed for the
# what-if report test (sim/whatif TestReportInBrowser), which opens
# report.html in headless Chromium and checks the numbers on the page. As
# root it installs Debian's chromium package; otherwise it says how and
# fails. BOOTROLL_CHROMIUM names another binary.
set -euo pipefail

bin="${BOOTROLL_CHROMIUM:-chromium}"
if command -v "$bin" >/dev/null 2>&1; then
	exit 0
fi

if [[ "$(id -u)" == 0 ]]; then
	echo ">> chromium not found: installing Debian's chromium with apt-get" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends chromium
	command -v chromium >/dev/null 2>&1 || {
		echo "apt-get install chromium succeeded but chromium is still not on PATH ($PATH)" >&2
		exit 1
	}
	exit 0
fi

cat >&2 <<'MSG'
chromium not found: the what-if report test (sim/whatif TestReportInBrowser)
renders report.html in headless Chromium. Install it, then run the tests again:
  sudo apt-get install -y --no-install-recommends chromium   # Debian/Ubuntu
or run `make test` as root, which installs it. BOOTROLL_SKIP_BROWSER=1 skips
the browser test (not in CI).
MSG
exit 1
