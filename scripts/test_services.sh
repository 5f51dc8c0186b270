#!/usr/bin/env bash
# Install the services the tests start for themselves, from the distribution (Debian/Ubuntu):
#   bash scripts/test_services.sh
# - Slurm (slurmctld, slurmd, slurmdbd, its client commands), munge and MariaDB:
#   tests/slurm_cluster.py runs a cluster with accounting in a temporary directory for
#   the Slurm tests: this machine as a node, and a second slurmd (`-N second`, at
#   127.0.0.2) as a second node, for the cells across two nodes.
# - PostgreSQL's server: tests/postgres_server.py runs one from initdb and pg_ctl in a
#   temporary directory for the results store's tests.
# - Chromium and its chromedriver: tests/browser.py drives a headless Chromium through
#   selenium for the tests of the HTML pages (Debian's browser, never a downloaded one).
# - Podman and catatonit (the init it runs as a container's PID 1): tests/test_podman.py
#   runs the podman executor's cells, rootful where the tests run as root.
# Nothing is started here, and nothing is installed that is already there.
set -euo pipefail

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

missing=()
[[ -x /usr/sbin/slurmctld ]] || missing+=(slurmctld)
[[ -x /usr/sbin/slurmd ]] || missing+=(slurmd)
command -v sbatch >/dev/null || missing+=(slurm-client)
[[ -x /usr/sbin/slurmdbd ]] || missing+=(slurmdbd)
[[ -x /usr/sbin/munged ]] || missing+=(munge)
[[ -x /usr/sbin/mariadbd ]] || missing+=(mariadb-server)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
[[ -x /usr/bin/chromedriver ]] || missing+=(chromium-driver)
command -v podman >/dev/null || missing+=(podman)
[[ -x /usr/libexec/podman/catatonit || -x /usr/bin/catatonit ]] || missing+=(catatonit)
if ((${#missing[@]})); then
    echo "test_services: installing ${missing[*]} (about 250 MB with MariaDB and PostgreSQL, 133 MB more with Chromium, 60 MB more with Podman)" >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi
# The packages start their own daemons against /etc/slurm, which has no configuration:
# stop them, so only the tests' cluster runs.
for service in slurmctld slurmd slurmdbd munge mariadb postgresql; do
    as_root systemctl stop "$service" >/dev/null 2>&1 || true
done
echo "test_services: Slurm $(dpkg-query -W -f='${Version}' slurmctld 2>/dev/null || echo '(version unknown)'), munge, MariaDB and PostgreSQL $(dpkg-query -W -f='${Version}' postgresql 2>/dev/null || echo '(version unknown)') are installed; Chromium $(dpkg-query -W -f='${Version}' chromium 2>/dev/null || echo '(version unknown)') and its chromedriver too; Podman $(dpkg-query -W -f='${Version}' podman 2>/dev/null || echo '(version unknown)')"
