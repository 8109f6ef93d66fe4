#!/usr/bin/env bash
# A two-node Slurm cluster on this one machine, for kactors' Slurm tests (issue 14): Debian's
# slurmctld and two slurmd in multiple-slurmd mode (nodes n1 and n2, both on 127.0.0.1 with
# ports of their own), four placeholder GPUs each (character devices made with mknod, so that
# steps get CUDA_VISIBLE_DEVICES), a short SlurmdTimeout. Needs root and the packages
# slurmd slurmctld slurm-client munge; no systemd.
#
#   scripts/slurm/cluster.sh start   # (re)starts it; prints the line to export SLURM_CONF
#   scripts/slurm/cluster.sh stop    # stops the daemons, cancels every job, removes the state
#   scripts/slurm/cluster.sh env     # prints `export SLURM_CONF=...`
#
# Everything lives under $KACTORS_SLURM_DIR (default /tmp/kactors-slurm); clients find the
# cluster through SLURM_CONF, so /etc/slurm is never written.
set -euo pipefail

dir=${KACTORS_SLURM_DIR:-/tmp/kactors-slurm}
conf="$dir/etc/slurm.conf"
nodes=(n1 n2)

env_line() {
    echo "export SLURM_CONF=$conf"
}

write_config() {
    mkdir -p "$dir/etc" "$dir/state" "$dir/log" "$dir/run"
    local cpus
    cpus=$(nproc)
    {
        echo "ClusterName=kactors"
        echo "SlurmctldHost=localhost"
        echo "SlurmctldPort=16817"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "MpiDefault=none"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "GresTypes=gpu"
        echo "ReturnToService=2"
        echo "KillWait=2"
        # A node whose slurmd stops answering is down after this many seconds (default 300).
        echo "SlurmdTimeout=10"
        echo "InactiveLimit=0"
        echo "SchedulerType=sched/builtin"
        echo "StateSaveLocation=$dir/state"
        echo "SlurmdSpoolDir=$dir/spool/%n"
        echo "SlurmctldPidFile=$dir/run/slurmctld.pid"
        echo "SlurmdPidFile=$dir/run/slurmd-%n.pid"
        echo "SlurmctldLogFile=$dir/log/slurmctld.log"
        echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
        echo "JobCompType=jobcomp/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        local port=17001
        for node in "${nodes[@]}"; do
            echo "NodeName=$node NodeAddr=127.0.0.1 Port=$port CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 Gres=gpu:4 State=UNKNOWN"
            port=$((port + 1))
        done
        echo "PartitionName=debug Nodes=$(IFS=,; echo "${nodes[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
    } >"$conf"
    {
        echo "AutoDetect=off"
        for node in "${nodes[@]}"; do
            echo "NodeName=$node Name=gpu File=$dir/dev/$node/gpu[0-3]"
        done
    } >"$dir/etc/gres.conf"
    for node in "${nodes[@]}"; do
        mkdir -p "$dir/spool/$node" "$dir/dev/$node"
        for index in 0 1 2 3; do
            # Slurm refuses plain files: a placeholder GPU must be a character device.
            [ -c "$dir/dev/$node/gpu$index" ] || mknod "$dir/dev/$node/gpu$index" c 195 "$index"
        done
    done
}

start_munge() {
    if pgrep -x munged >/dev/null; then
        return
    fi
    [ -f /etc/munge/munge.key ] || mungekey -c
    install -d -o munge -g munge /run/munge
    runuser -u munge -- /usr/sbin/munged
}

wait_until_idle() {
    local deadline=$((SECONDS + 60))
    while [ $SECONDS -lt $deadline ]; do
        local states
        states=$(SLURM_CONF=$conf sinfo --noheader --Node --format=%T 2>/dev/null | sort -u | tr '\n' ' ')
        if [ "$states" = "idle " ]; then
            return
        fi
        sleep 0.5
    done
    echo "cluster.sh: the nodes did not become idle within 60 s; see $dir/log" >&2
    SLURM_CONF=$conf sinfo --Node >&2 || true
    exit 1
}

start() {
    stop_daemons
    rm -rf "$dir/state" "$dir/spool"
    write_config
    start_munge
    SLURM_CONF=$conf setsid /usr/sbin/slurmctld -D -i >"$dir/log/slurmctld.out" 2>&1 </dev/null &
    for node in "${nodes[@]}"; do
        SLURM_CONF=$conf setsid /usr/sbin/slurmd -D -N "$node" >"$dir/log/slurmd-$node.out" 2>&1 </dev/null &
    done
    wait_until_idle
    env_line
}

# Every daemon of this cluster: slurmctld and the slurmd of each node (by their pid files).
daemon_pids() {
    for pidfile in "$dir"/run/*.pid; do
        [ -f "$pidfile" ] && cat "$pidfile"
    done
    return 0
}

stop_daemons() {
    if [ -f "$conf" ] && [ -f "$dir/run/slurmctld.pid" ]; then
        SLURM_CONF=$conf scancel --quiet --full --user=root 2>/dev/null || true
    fi
    local pids
    pids=$(daemon_pids | tr '\n' ' ')
    [ -n "${pids// /}" ] || return 0
    # Each daemon takes a second or two to exit after TERM: all at once.
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    local deadline=$((SECONDS + 15))
    for pid in $pids; do
        while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
            sleep 0.2
        done
        kill -KILL "$pid" 2>/dev/null || true
    done
    rm -f "$dir"/run/*.pid
}

case "${1:-}" in
    start) start ;;
    stop)
        stop_daemons
        rm -rf "$dir"
        ;;
    env) env_line ;;
    *)
        echo "usage: $0 start|stop|env" >&2
        exit 2
        ;;
esac
