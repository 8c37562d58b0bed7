#!/bin/bash
# Stop the private Slurm cluster started by start.sh DIR, and make sure no
# process belonging to it (daemons, slurmstepd, job processes) survives.
# Usage: stop.sh DIR      exit status 0 = nothing left, 1 = something survived
set -uo pipefail

D=${1:?usage: stop.sh DIR}
[ -d "$D" ] || { echo "no such dir $D" >&2; exit 0; }
D=$(cd "$D" && pwd -P)
export SLURM_CONF="$D/slurm.conf"

# alive = exists and is not a zombie (pid 1 here may reap zombies only lazily)
alive() {
    local st
    kill -0 "$1" 2>/dev/null || return 1
    read -r st 2>/dev/null <"/proc/$1/stat" || return 1
    st=${st##*) }
    [[ ${st%% *} != Z ]]
}
# is PID one of ours?  Daemons started by start.sh carry DROVER_SLURM_TEST_DIR=$D
# in their environment. slurmd starts slurmstepd (and jobs) with a clean env that
# holds SLURM_CONF=$D/slurm.conf; job processes also carry SLURM_JOB_ID.
# (Plain clients that merely export SLURM_CONF are NOT matched.)
ours() {
    local -a e; local s nl=$'\n' comm
    mapfile -t -d '' e 2>/dev/null <"/proc/$1/environ" || return 1
    local IFS=$nl; s="$nl${e[*]}$nl"
    [[ $s == *"${nl}DROVER_SLURM_TEST_DIR=$D$nl"* ]] && return 0
    [[ $s == *"${nl}SLURM_CONF=$D/slurm.conf$nl"* ]] || return 1
    read -r comm 2>/dev/null <"/proc/$1/comm"
    [[ $comm == slurmstepd || $s == *"${nl}SLURM_JOB_ID="* ]]
}
# pids from our pid files that are alive and really ours
pidfile_pids() {
    local p
    for p in $(cat "$@" 2>/dev/null); do
        [[ $p =~ ^[0-9]+$ ]] && ours "$p" && echo "$p"
    done
}

# All processes for which `ours` holds, plus all their descendants
# (catches job children that reset their environment).
cluster_pids() {
    local me=$$ p roots=() all
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = "$me" ] || [ "$p" = "$BASHPID" ] && continue
        ours "$p" && roots+=("$p")
    done
    [ ${#roots[@]} -eq 0 ] && return 0
    # descendants via ppid table
    all=$(ps -eo pid=,ppid= | awk -v r="${roots[*]}" -v me="$me" '
        BEGIN { n = split(r, a, " "); for (i = 1; i <= n; i++) keep[a[i]] = 1 }
        { par[$1] = $2 }
        END {
            do { ch = 0
                 for (p in par) if (!(p in keep) && (par[p] in keep)) { keep[p] = 1; ch = 1 }
            } while (ch)
            for (p in keep) if (p != me && (p in par)) print p
        }')
    # never include ourselves or our ancestors (stop.sh may be run from a job)
    local anc=" " q=$$
    while [ -n "$q" ] && [ "$q" != 0 ]; do anc+="$q "; q=$(ppid_of "$q"); done
    for p in $all; do case "$anc" in *" $p "*) ;; *) echo "$p" ;; esac; done
}

ppid_of() {
    local st
    read -r st 2>/dev/null <"/proc/$1/stat" || return 0
    st=${st##*) }; st=${st#* }; echo "${st%% *}"
}

wait_gone() {  # wait_gone SECONDS PID...
    local t=$(( $1 * 10 )); shift
    while [ $t -gt 0 ]; do
        local any=
        for p in "$@"; do alive "$p" && any=1; done
        [ -z "$any" ] && return 0
        sleep 0.1; t=$((t - 1))
    done
    return 1
}

# 1. graceful: cancel all jobs and let them finish (so slurmd is not left
#    retrying epilog-complete RPCs to a dead controller, which takes ~10s),
#    then SIGTERM slurmd and slurmctld.
if [ -f "$SLURM_CONF" ] && [ -n "$(pidfile_pids "$D/run/slurmctld.pid")" ]; then
    jobs=$(timeout 5 squeue -h -o %i 2>/dev/null)
    if [ -n "$jobs" ]; then
        timeout 5 scancel --quiet $jobs 2>/dev/null
        for _ in $(seq 1 50); do   # <= 5s
            [ -z "$(timeout 5 squeue -h -t all -o '%i %T' 2>/dev/null | grep -vE ' (COMPLETED|CANCELLED|FAILED|TIMEOUT|NODE_FAIL|PREEMPTED|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)$')" ] && break
            sleep 0.1
        done
    fi
fi
slurm_pids=$(pidfile_pids "$D"/run/slurmd*.pid "$D"/run/slurmctld.pid)
touched="$slurm_pids"
[ -n "$slurm_pids" ] && kill -TERM $slurm_pids 2>/dev/null
wait_gone 10 $slurm_pids || kill -KILL $slurm_pids 2>/dev/null

# 2. anything else of ours (slurmstepd, job processes, slurmscriptd): TERM, then KILL
munged_pid=$(pidfile_pids "$D/run/munged.pid")
left=$(cluster_pids | grep -vxF "${munged_pid:-x}")
touched="$touched $left $munged_pid"
if [ -n "$left" ]; then
    kill -TERM $left 2>/dev/null
    wait_gone 3 $left || kill -KILL $left 2>/dev/null
    wait_gone 2 $left
fi

# 3. munged last (slurm needs it while shutting down)
if m=$munged_pid && [ -n "$m" ] && alive "$m"; then
    kill -TERM "$m" 2>/dev/null    # (munged --stop works too but polls, ~2s slower)
    wait_gone 5 "$m" || { kill -KILL "$m" 2>/dev/null; wait_gone 2 "$m"; }
fi

# 4. final sweep and report
left=$(cluster_pids)
if [ -n "$left" ]; then
    kill -KILL $left 2>/dev/null; sleep 0.5
    left=$(for p in $left; do alive "$p" && echo "$p"; done)
fi
if [ -n "$left" ]; then
    echo "processes still alive:" >&2
    ps -o pid,ppid,args -p $(echo $left | tr ' ' ,) >&2
    exit 1
fi
# Exited daemons are re-parented to pid 1, which here reaps zombies lazily;
# give it a moment so callers checking `ps` see nothing at all (not fatal).
for _ in $(seq 1 30); do
    z=
    for p in $touched; do [ -e "/proc/$p" ] && z=1; done
    [ -z "$z" ] && break
    sleep 0.1
done
rm -f "$D"/run/*.pid
exit 0
