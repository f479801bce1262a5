#!/usr/bin/env bash
# scripts/multihost.sh: several "hosts" on this one machine, for testing what crosses a network. Each host is a
# network namespace with its own address, its own /dev/shm (a private mount namespace over a per-host directory) and
# its own hostname (a UTS namespace); the hosts meet on a bridge that lives in a namespace of its own, so no address
# or interface appears outside them. The command runs under mpirun started on host 0, with a hostfile of the hosts'
# addresses and an rsh agent that enters the named host's namespaces (Open MPI's --mca plm_rsh_agent) instead of
# ssh; MPI traffic between hosts goes over TCP, within a host through shared memory, as on real machines.
#
#   scripts/multihost.sh [--hosts N] [--per-host K] [--timeout S] -- PROGRAM ARGS...
#       runs mpirun -np N*K --map-by ppr:K:node PROGRAM ARGS across the hosts (ranks 0..K-1 on host 0, ...)
#   scripts/multihost.sh --hosts 2 --per-host 2 -- ./train_gpt --zero 1 --train ... --total-batch-size 128 ...
#   MULTIHOST_MPIRUN_ARGS='-x OMP_NUM_THREADS=1' ...      extra mpirun flags (before the program)
#   --private DIR      hosts other than host 0 see an empty DIR of their own (a tmpfs over it): no filesystem shared
#                      with host 0 there, as on machines without one; host 0 sees the real DIR
#   MULTIHOST_SETUP='cp a b'   a shell command each host other than host 0 runs first, in its own view of the files
#                      (MULTIHOST_HOST holds its number): to give a host other data
#
# Defaults: 2 hosts, 2 ranks each, no timeout. Everything is torn down on exit, whatever happens (the namespaces,
# the veth pairs and the bridge go with them; the per-host directories are removed). The exit status is mpirun's;
# 77 means the hosts could not be made (not root, no `ip`, no namespaces here): the caller skips, with the message.
# Several copies may run at once: names and the subnet carry this script's PID.
set -u

HOSTS=2
PER_HOST=2
TIMEOUT=0
PRIVATE=""
while [ $# -gt 0 ]; do
    case "$1" in
        --private) PRIVATE="$2"; shift 2 ;;
        --hosts) HOSTS="$2"; shift 2 ;;
        --per-host) PER_HOST="$2"; shift 2 ;;
        --timeout) TIMEOUT="$2"; shift 2 ;;
        --) shift; break ;;
        *) echo "error: multihost: unknown option '$1' (--hosts N --per-host K --timeout S --private DIR -- PROGRAM ARGS)" >&2; exit 2 ;;
    esac
done
[[ "$HOSTS" =~ ^[1-9][0-9]?$ && "$PER_HOST" =~ ^[1-9][0-9]?$ && "$TIMEOUT" =~ ^[0-9]+$ ]] ||
    { echo "error: multihost: --hosts and --per-host take 1-99, --timeout seconds" >&2; exit 2; }
[ $# -gt 0 ] || { echo "error: multihost: no program given (after --)" >&2; exit 2; }

skip() { echo "multihost: cannot make hosts here: $* (skipped)"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip > /dev/null || skip "no 'ip' (apt-get install iproute2)"
command -v unshare > /dev/null || skip "no 'unshare' (util-linux)"
command -v mpirun > /dev/null || skip "no mpirun"

TAG="mh$$"                         # namespace and interface names
NET="10.$((100 + $$ % 100)).$(($$ / 100 % 250)).0"
PREFIX="${NET%.0}"                 # host i has PREFIX.(i+1)
DIR="$(mktemp -d /tmp/multihost.XXXXXX)"

cleanup() {
    for i in $(seq 0 $((HOSTS - 1))); do ip netns del "${TAG}_h$i" 2> /dev/null; done
    ip netns del "${TAG}_sw" 2> /dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# the switch: a bridge in its own namespace; each host's eth0 is one end of a veth pair whose other end is a bridge port
ip netns add "${TAG}_sw" 2> /dev/null || skip "cannot create a network namespace (ip netns add failed)"
ip -n "${TAG}_sw" link add br0 type bridge || skip "cannot create a bridge"
ip -n "${TAG}_sw" link set br0 up
for i in $(seq 0 $((HOSTS - 1))); do
    ns="${TAG}_h$i"
    ip netns add "$ns" || skip "cannot create namespace $ns"
    ip link add "${TAG}v$i" type veth peer name eth0 netns "$ns" || skip "cannot create a veth pair"
    ip link set "${TAG}v$i" netns "${TAG}_sw"
    ip -n "${TAG}_sw" link set "${TAG}v$i" master br0
    ip -n "${TAG}_sw" link set "${TAG}v$i" up
    ip -n "$ns" addr add "$PREFIX.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    mkdir -p "$DIR/h$i/shm"
    echo "$PREFIX.$((i + 1)) slots=$PER_HOST" >> "$DIR/hostfile"
done

# enter host i: its network namespace, then a private mount namespace and UTS namespace, where `inhost` sets the
# hostname, puts the host's directory over /dev/shm (and an empty tmpfs over --private on hosts other than 0, then
# runs MULTIHOST_SETUP there), and runs the command
printf '%s\n' "$PRIVATE" > "$DIR/private_dir"
printf '%s\n' "${MULTIHOST_SETUP:-}" > "$DIR/setup"
cat > "$DIR/inhost" << 'EOF'
#!/bin/sh
# inhost DIR I CMD: inside host I's namespaces
dir="$1"; i="$2"; shift 2
hostname "host$i" && mount --bind "$dir/h$i/shm" /dev/shm || exit 1
private=$(cat "$dir/private_dir")
if [ "$i" != 0 ] && [ -n "$private" ]; then mount -t tmpfs tmpfs "$private" || exit 1; fi
if [ "$i" != 0 ] && [ -s "$dir/setup" ]; then MULTIHOST_HOST="$i" sh "$dir/setup" || exit 1; fi
exec sh -c "$*"
EOF
cat > "$DIR/enter" << EOF
#!/bin/sh
# enter I CMD: runs CMD (one shell string) on host I
i="\$1"; shift
exec ip netns exec "${TAG}_h\$i" unshare --mount --uts --propagation private sh "$DIR/inhost" "$DIR" "\$i" "\$*"
EOF
# the rsh agent mpirun calls as: agent [ssh options] HOST COMMAND...; HOST is an address of the hostfile
cat > "$DIR/agent" << EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host="\$1"; shift
last="\${host##*.}"
exec "$DIR/enter" "\$((last - 1))" "\$*"
EOF
[ -z "$PRIVATE" ] || mkdir -p "$PRIVATE" || { echo "error: multihost: cannot create --private $PRIVATE" >&2; exit 2; }
chmod +x "$DIR/enter" "$DIR/agent"

read -r -a EXTRA <<< "${MULTIHOST_MPIRUN_ARGS:-}"
MPI=(mpirun --allow-run-as-root --hostfile "$DIR/hostfile" -np $((HOSTS * PER_HOST)) --map-by "ppr:$PER_HOST:node" --bind-to none
     --mca plm_rsh_agent "$DIR/agent" --mca btl self,vader,tcp --mca btl_tcp_if_include "$NET/24" --mca oob_tcp_if_include "$NET/24"
     "${EXTRA[@]}" "$@")
CMD="cd '$PWD' && exec"
for a in "${MPI[@]}"; do CMD="$CMD '${a//\'/\'\\\'\'}'"; done
if [ "$TIMEOUT" -gt 0 ]; then
    timeout "$TIMEOUT" "$DIR/enter" 0 "$CMD"
else
    "$DIR/enter" 0 "$CMD"
fi
