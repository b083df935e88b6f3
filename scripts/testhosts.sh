#!/usr/bin/env bash
# Test "hosts" on this machine: network namespaces, each with its own address and its own sshd.
#
#   scripts/testhosts.sh up N     bring up hosts th1..thN (prints the ssh config to use)
#   scripts/testhosts.sh down     stop their sshd and remove namespaces, links and keys
#   scripts/testhosts.sh status   the hosts that are up
#
# Layout: bridge $BR (10.231.77.1/24, this side) with one veth per namespace ($NS_PREFIX$i,
# address 10.231.77.$((10+i))). Nothing is routed or forwarded: the namespaces have no default
# route, so their traffic stays on this private link. Each sshd runs under `taskset` on its share
# of the CPUs (the cores split between hosts; every process started over ssh inherits it) and in
# its own UTS namespace with hostname th$i. Keys are made for the test under $DIR.
# Use: ssh -F $DIR/ssh_config th1 ...  /  autotune run --hosts th1,th2 --ssh-config $DIR/ssh_config
# A second set beside the first (the SLURM test's, while another test has th1..thN up):
#   AUTOTUNE_TESTHOSTS_TAG=s AUTOTUNE_TESTHOSTS_NET=10.231.78 AUTOTUNE_TESTHOSTS_NAME=sl \
#   AUTOTUNE_TESTHOSTS_DIR=/tmp/other scripts/testhosts.sh up 2
# names its namespaces, links and bridge with the tag, so neither set's `down` touches the other.
# Needs root, iproute2, openssh-server and util-linux (unshare, taskset).
set -euo pipefail
DIR="${AUTOTUNE_TESTHOSTS_DIR:-/tmp/autotune-testhosts}"
TAG="${AUTOTUNE_TESTHOSTS_TAG:-}"
NAME="${AUTOTUNE_TESTHOSTS_NAME:-th}"
NET="${AUTOTUNE_TESTHOSTS_NET:-10.231.77}"
[[ "$TAG" =~ ^[a-z]?$ ]] || { echo "testhosts: AUTOTUNE_TESTHOSTS_TAG must be one letter" >&2; exit 2; }
[[ "$NAME" =~ ^[a-z]+$ ]] || { echo "testhosts: AUTOTUNE_TESTHOSTS_NAME must be letters" >&2; exit 2; }
[[ "$NET" =~ ^10\.[0-9]+\.[0-9]+$ ]] || { echo "testhosts: AUTOTUNE_TESTHOSTS_NET: 10.X.Y" >&2; exit 2; }
BR="attb${TAG}0"
NS_PREFIX="atth$TAG"
VETH="atv$TAG"

die() { echo "testhosts: $*" >&2; exit 2; }

down() {
    for pidf in "$DIR"/sshd*.pid; do
        [ -f "$pidf" ] || continue
        pid=$(cat "$pidf")
        # Only our sshd: its command line names our config file.
        if grep -qs "$DIR/sshd_config" "/proc/$pid/cmdline"; then kill "$pid" 2>/dev/null || true; fi
        rm -f "$pidf"
    done
    for ns in $(ip netns list | awk '{print $1}' | grep "^$NS_PREFIX[0-9][0-9]*$" || true); do
        # Anything still running in a test host (a trial left behind) goes with it.
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$ns"
    done
    for link in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^$VETH[0-9][0-9]*$" || true); do
        ip link del "$link" 2>/dev/null || true
    done
    if ip link show "$BR" >/dev/null 2>&1; then ip link del "$BR"; fi
    rm -rf "$DIR"
    echo "testhosts: down"
}

up() {
    local n="$1"
    [[ "$n" =~ ^[1-9][0-9]?$ ]] || die "up N: N must be 1..99, got '$n'"
    [ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
    command -v /usr/sbin/sshd >/dev/null || die "sshd missing: apt-get install -y openssh-server"
    down >/dev/null 2>&1 || true
    mkdir -p "$DIR" /run/sshd
    chmod 700 "$DIR"
    ssh-keygen -q -t ed25519 -N "" -f "$DIR/id_ed25519" -C autotune-testhosts
    ssh-keygen -q -t ed25519 -N "" -f "$DIR/host_key" -C autotune-testhosts-host
    cp "$DIR/id_ed25519.pub" "$DIR/authorized_keys"
    ip link add "$BR" type bridge
    ip addr add "$NET.1/24" dev "$BR"
    ip link set "$BR" up
    mapfile -t cpus < <(python3 -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
    : > "$DIR/ssh_config"
    for i in $(seq 1 "$n"); do
        local ns="$NS_PREFIX$i" addr="$NET.$((10 + i))"
        ip netns add "$ns"
        ip link add "$VETH$i" type veth peer name eth0 netns "$ns"
        ip link set "$VETH$i" master "$BR" up
        ip -n "$ns" addr add "$addr/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        # CPUs dealt round-robin: host i gets every n-th CPU (at least one).
        local mine=() j
        for ((j = i - 1; j < ${#cpus[@]}; j += n)); do mine+=("${cpus[$j]}"); done
        [ ${#mine[@]} -gt 0 ] || mine=("${cpus[$(((i - 1) % ${#cpus[@]}))]}")
        local cpulist
        cpulist=$(IFS=,; echo "${mine[*]}")
        cat > "$DIR/sshd_config$i" <<EOF
ListenAddress $addr
Port 22
HostKey $DIR/host_key
AuthorizedKeysFile $DIR/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $DIR/sshd$i.pid
AcceptEnv no
MaxStartups 100:30:200
MaxSessions 100
EOF
        ip netns exec "$ns" unshare --uts taskset -c "$cpulist" \
            sh -c "hostname $NAME$i && exec /usr/sbin/sshd -f '$DIR/sshd_config$i'"
        cat >> "$DIR/ssh_config" <<EOF
Host $NAME$i
  HostName $addr
  User root
  IdentityFile $DIR/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
  ConnectTimeout 5
EOF
        echo "$NAME$i $addr cpus $cpulist netns $ns" >> "$DIR/hosts"
    done
    for i in $(seq 1 "$n"); do   # wait until every sshd answers
        for _ in $(seq 1 50); do
            ssh -F "$DIR/ssh_config" "$NAME$i" true 2>/dev/null && break
            sleep 0.1
        done
        ssh -F "$DIR/ssh_config" "$NAME$i" true || die "$NAME$i: sshd does not answer"
    done
    cat "$DIR/hosts"
    echo "ssh config: $DIR/ssh_config"
}

case "${1:-}" in
    up) up "${2:-2}" ;;
    down) down ;;
    status) [ -f "$DIR/hosts" ] && cat "$DIR/hosts" || echo "testhosts: none up" ;;
    *) die "usage: $0 up N | down | status" ;;
esac
