#!/usr/bin/env bash
# ensure-containerd.sh makes sure containerd is on PATH for the CRI tests
# (nodedaemon/cri, nodedaemon/prefetch), which start their own containerd
# with a config, state and socket in a temporary directory. As root it
# installs Debian's containerd package; otherwise it says how and fails.
set -euo pipefail

if command -v containerd >/dev/null 2>&1; then
	exit 0
fi

if [[ "$(id -u)" == 0 ]]; then
	echo ">> containerd not found: installing Debian's containerd with apt-get" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq containerd
	command -v containerd >/dev/null 2>&1 || {
		echo "apt-get install containerd succeeded but containerd is still not on PATH ($PATH)" >&2
		exit 1
	}
	exit 0
fi

cat >&2 <<'MSG'
containerd not found: the CRI integration tests (nodedaemon/cri, nodedaemon/prefetch)
start a real containerd. Install it, then run the tests again:
  sudo apt-get install -y containerd      # Debian/Ubuntu
or run `make test` as root, which installs it. The out-of-space tests also
need root to mount a small tmpfs. `make unit` (go test -short) skips them.
MSG
exit 1
