#!/bin/bash
# A throw-away Slurm cluster on this one host, for the multi-node tests
# (crates/cli/tests/slurm*.rs, run with COLLBENCH_SLURM_TESTS=1).
#
# Installs Debian's Slurm + munge when missing, then starts one controller and
# NNODES (default 2) slurmd daemons that pretend to be nodes n1..nN, each with
# 8 fake GPUs (GRES files are links to /dev/null). srun then sets
# SLURM_PROCID, SLURM_NODELIST, SLURMD_NODENAME, ... as on a real cluster.
#
# Needs root and no systemd (CI containers). Idempotent: a second run leaves
# running daemons alone and only waits until the nodes are idle.
set -euo pipefail
NNODES=${NNODES:-2}
export DEBIAN_FRONTEND=noninteractive

if ! command -v slurmctld >/dev/null || ! command -v srun >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

host=$(hostname -s)
cpus=$(nproc)

# Ranks find rank 0 through the first name in SLURM_NODELIST (n1): make the
# emulated names resolve here, as DNS would on a real cluster.
for n in $(seq 1 "$NNODES"); do
  grep -qE "[[:space:]]n$n([[:space:]]|$)" /etc/hosts || echo "127.0.0.1 n$n" >>/etc/hosts
done

mkdir -p /var/spool/slurmctld /var/log/slurm /run/munge /tmp/fakegpu /etc/slurm
chown munge:munge /run/munge
for i in 0 1 2 3 4 5 6 7; do ln -sf /dev/null /tmp/fakegpu/nvidia$i; done

# Written every time (cheap); the daemons below only start when not running,
# so a second run does not disturb a live cluster.
cat >/etc/slurm/slurm.conf <<CONF
ClusterName=ci
SlurmctldHost=$host
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
GresTypes=gpu
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
NodeName=n[1-$NNODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=[17001-$((17000 + NNODES))] CPUs=$cpus Gres=gpu:8 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
printf 'AutoDetect=off\nNodeName=n[1-%s] Name=gpu File=/tmp/fakegpu/nvidia[0-7]\n' "$NNODES" >/etc/slurm/gres.conf

# A daemon counts as running when its pid file names a live process.
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

[ -S /run/munge/munge.socket.2 ] && pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
running /run/slurmctld.pid || /usr/sbin/slurmctld
for n in $(seq 1 "$NNODES"); do
  mkdir -p "/var/spool/slurmd/n$n"
  running "/run/slurmd-n$n.pid" || /usr/sbin/slurmd -N "n$n"
done

for _ in $(seq 1 120); do
  if [ "$(sinfo -h -t idle -o '%D' 2>/dev/null | head -1)" = "$NNODES" ]; then
    sinfo
    exit 0
  fi
  sleep 0.5
done
echo "slurm-setup: the $NNODES emulated nodes did not become idle within 60 s" >&2
tail -n 20 /var/log/slurm/*.log >&2
exit 1
