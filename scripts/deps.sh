#!/usr/bin/env bash
# Installs, from Debian's packages, whatever airlock needs to build, run and test that this
# machine lacks. Fast when nothing is missing: it asks dpkg first and calls apt only if needed.
set -euo pipefail

packages=(
        # build
        gcc meson ninja-build pkg-config libseccomp-dev libjansson-dev libpython3.11-dev python3
        # SHA-256 of the audit log's code_sha256 (libcrypto)
        libssl-dev
        libmicrohttpd-dev libcurl4-openssl-dev
        libsqlite3-dev libpcre2-dev
        # SHA-256 of tenant keys (src/tenant)
        libssl-dev
        # what the sandbox's default profiles import
        python3-numpy python3-pandas python3-scipy python3-matplotlib
        # the data stack the default profile offers, as E2B's image does (docs/PROFILES.md,
        # "The data stack": what each costs to import, which data-science and visualization allow)
        python3-seaborn python3-sklearn python3-statsmodels python3-plotly python3-openpyxl
        python3-xlrd python3-bs4 python3-lxml python3-requests python3-sympy python3-networkx
        python3-tabulate python3-tqdm python3-docx python3-pypdf python3-reportlab
        python3-skimage python3-xarray python3-nltk python3-pil python3-ipython
        # plotly's fig.show() gives its JSON through IPython's display, which needs nbformat
        # (docs/IPYTHON.md)
        python3-nbformat
        # the JavaScript REPL of `language: "javascript"` (Debian 12: Node 18; nodesource's
        # nodejs package, Node 20, satisfies this too)
        nodejs
        # the compiler of `language: "typescript"` cells (the REPL loads it from
        # /usr/share/nodejs/typescript with the first one)
        node-typescript
        # the R session of `language: "r"` (R 4.1 or later: libR.so, embedded by the runner)
        r-base-core
        # tests and checks
        libcriterion-dev python3-pytest python3-requests clang-format
        # the dashboard's tests (tests/ui): a real headless browser, and a font to draw with
        chromium fonts-dejavu-core python3-pil
        # GET /metrics is parsed by a real Prometheus text parser (tests/e2e/test_metrics.py)
        python3-prometheus-client
        # the man page (docs/airlock.1.md), and the packaging tests' tools
        pandoc man-db systemd util-linux
        # scripts/cluster.sh: the front door (packaging/kubernetes/base/frontdoor), the nodes'
        # namespaces and bridge, health checks; tests/e2e/test_kubernetes_manifests.py reads YAML
        nginx-light iproute2 curl python3-yaml
        # the Python client's offline install (pip install --no-build-isolation --no-index)
        python3-pip python3-setuptools python3-wheel
        # the microVM tier (src/vm): QEMU's microvm machine, the guest's EROFS root and
        # initramfs; the guest kernel itself is unpacked by scripts/vm-kernel.sh
        qemu-system-x86 erofs-utils cpio
)
# `kubectl kustomize packaging/kubernetes` (tests/e2e/test_kubernetes_manifests.py): Debian's
# kubernetes-client, unless a kubectl is already there (another package's, such as Google's).
if ! command -v kubectl >/dev/null; then
        packages+=(kubernetes-client)
fi

# The microVM tier's guest kernel (scripts/vm-kernel.sh). Not fatal: without it that tier's
# profile cannot be built, its tests skip saying so, and everything else works.
vm_kernel() {
        "$(dirname "$0")/vm-kernel.sh" ||
                echo "deps: the microVM guest kernel could not be unpacked (see above): the microvm profile cannot be built and its tests skip" >&2
}

missing=()
for p in "${packages[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
                missing+=("$p")
        fi
done
if [ ${#missing[@]} -eq 0 ]; then
        vm_kernel
        exit 0
fi

echo "deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
        sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
vm_kernel
