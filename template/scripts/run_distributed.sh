#!/usr/bin/env bash
# Data-parallel training with msrun (MindSpore's launcher); extra arguments go to train.py.
#
#   bash scripts/run_distributed.sh 2                          # 2 processes on this host
#   bash scripts/run_distributed.sh 8 --set train.epochs=3
#   NODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 bash scripts/run_distributed.sh 8   # on each node
#
# WORKERS is the total number of processes (all nodes); each node starts WORKERS/NODES.
# MASTER_PORT: on one node, a free port unless set (two jobs on one host never meet); on several,
# 8118 unless set (every node must name the same one). Each node writes LOG_DIR/msrun.node<N>.out.
# JOIN_TIMEOUT: seconds to wait for every process to join the job (default 300 on one node; 1800 on
# several, whose hosts start apart: mindformers' launcher waits 7200). MASTER_ADDR: rank 0's node,
# required when NODES > 1 (a default of this host would leave every other node waiting).
# BIND_CORE=true: msrun pins each worker to its own CPU cores (--bind_core; accelerator hosts whose
# data pipeline competes for cores; MindSpore 2.7 and 2.10 both have it). Default false.
#
# A rank that dies (killed, out of memory) or fails ends the job at once: msrun stops the other
# workers within a second but then waits ~30 s for its scheduler's heartbeat timeout and prints a
# traceback; this script ends the scheduler too, leaves no process behind, and says in one line
# which rank, its log file and the command that continues from this run's last checkpoint (its
# own folder's last.ckpt, read from rank 0's log; never another run's).
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS=${1:-2}
shift $(( $# > 0 ? 1 : 0 ))
NODES=${NODES:-1}
NODE_RANK=${NODE_RANK:-0}
if (( NODES > 1 )) && [ -z "${MASTER_ADDR:-}" ]; then
  echo "error: NODES=$NODES needs MASTER_ADDR, the address of the node with NODE_RANK=0, the same on every node" >&2
  exit 1
fi
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
LOG_DIR=${LOG_DIR:-msrun_log}
JOIN_TIMEOUT=${JOIN_TIMEOUT:-$(( NODES > 1 ? 1800 : 300 ))}
BIND_CORE=${BIND_CORE:-false}

if (( WORKERS % NODES != 0 )); then
  echo "error: WORKERS=$WORKERS is not divisible by NODES=$NODES" >&2
  exit 2
fi
# msrun starts workers as plain `python train.py`: put the environment in use (or $PYTHON's) first on PATH.
PYTHON_BIN=$("${PYTHON:-python}" -c 'import os, sys; print(os.path.dirname(sys.executable))')
export PATH="$PYTHON_BIN:$PATH"
if [[ -z "${MASTER_PORT:-}" ]]; then
  if (( NODES == 1 )); then
    MASTER_PORT=$("$PYTHON_BIN/python" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
  else
    MASTER_PORT=8118
  fi
fi

mkdir -p "$LOG_DIR"
OUT="$LOG_DIR/msrun.node$NODE_RANK.out"  # one per node: nodes may share LOG_DIR
STARTED=$(mktemp)  # when this job started: the worker logs it wrote are newer
trap 'rm -f "$STARTED"' EXIT
: > "$OUT"
# Its own session: msrun and its scheduler form one process group this script can end.
setsid msrun --worker_num="$WORKERS" --local_worker_num=$(( WORKERS / NODES )) \
  --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" \
  --cluster_time_out="$JOIN_TIMEOUT" --bind_core="$BIND_CORE" --log_dir="$LOG_DIR" --join=True train.py "$@" \
  > "$OUT" 2>&1 &
LAUNCHER=$!
tail -n +1 -f --pid="$LAUNCHER" "$OUT" &
TAIL=$!
declare -A RANK_OF=()  # worker pid -> rank, read from the environment msrun gives each worker
SCHED=""  # msrun's scheduler (node 0): once it dies the workers wait ~60 s for their heartbeats
record_workers() {
  local pid env
  for pid in $(pgrep -P "$LAUNCHER" 2>/dev/null); do
    [[ -n "${RANK_OF[$pid]:-}" || "$pid" == "$SCHED" ]] && continue
    env=$(tr '\0' '\n' 2>/dev/null < "/proc/$pid/environ") || continue
    if grep -qx "MS_ROLE=MS_WORKER" <<< "$env"; then
      RANK_OF[$pid]=$(sed -n 's/^RANK_ID=//p' <<< "$env")
    elif grep -qx "MS_ROLE=MS_SCHED" <<< "$env"; then
      SCHED=$pid
    fi
  done
}
gone() {  # no such process, or one that has exited (a zombie its parent has not reaped)
  local state
  state=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$1/status" 2>/dev/null)
  [[ -z "$state" || "$state" == Z || "$state" == X ]]
}
workers_running() {
  local pid
  for pid in "${!RANK_OF[@]}"; do gone "$pid" || return 0; done
  return 1
}
# Ctrl-C / SIGTERM: the workers stop together at one step and rank 0 saves last.ckpt (train.py).
stopping=""
trap 'stopping=1; kill -TERM "${!RANK_OF[@]}" 2>/dev/null || true' INT TERM

failed=""
orphaned=0  # seconds the workers have run without their scheduler
while kill -0 "$LAUNCHER" 2>/dev/null; do
  record_workers
  failed=$(grep -m1 -o "Worker process [0-9]* exit with exception. Error code: -\?[0-9]*" "$OUT" || true)
  [[ -n "$failed" ]] && break
  if [[ -n "$SCHED" ]] && gone "$SCHED" && workers_running; then
    (( ++orphaned < 5 )) || { failed="scheduler"; break; }  # 5 s: not a job that is winding down
  fi
  sleep 1
done
rc=0
if [[ -n "$failed" ]]; then
  kill -KILL -- "-$LAUNCHER" "${!RANK_OF[@]}" 2>/dev/null || true  # msrun, its scheduler, any worker left
fi
wait "$LAUNCHER" 2>/dev/null || rc=$?
wait "$TAIL" 2>/dev/null || true
# msrun may have exited before the loop above read its failure line: read it once more.
[[ -n "$failed" ]] || failed=$(grep -m1 -o "Worker process [0-9]* exit with exception. Error code: -\?[0-9]*" "$OUT" || true)
[[ -z "$failed" ]] && exit "$rc"

# This run's folder, as rank 0 logged it; continue from its last.ckpt (the user's --resume replaced).
run_dir=$(sed -n 's/.*; run dir \(.*\)$/\1/p' "$LOG_DIR/worker_0.log" 2>/dev/null | tail -n 1 || true)
args=("$@")
rest=()  # the arguments but a --resume and its value
for (( i = 0; i < ${#args[@]}; i++ )); do
  if [[ "${args[i]}" == "--resume" ]]; then (( i += 1 )); continue; fi
  rest+=("${args[i]}")
done
command() {  # this script with these arguments, shell-quoted: pasted in a shell, exactly these
  printf 'bash scripts/run_distributed.sh %s' "$WORKERS"
  (( $# == 0 )) || printf ' %q' "$@"
}
if [[ -n "$run_dir" && -f "$run_dir/last.ckpt" ]]; then
  again="continue with: $(command "${rest[@]}" --resume "$run_dir/last.ckpt")"
elif [[ -n "$run_dir" ]]; then
  again="no checkpoint was saved in $run_dir; start again with: $(command "${args[@]}")"
elif (( NODE_RANK == 0 )); then
  again="no run had started; start again with: $(command "${args[@]}")"
else
  again="continue with the command node 0 prints"
fi
# A job that never formed (a node that did not start, a wrong MASTER_ADDR or port): say so, not a rank.
if find "$LOG_DIR" -maxdepth 1 -name 'worker_*.log' -newer "$STARTED" -print0 2>/dev/null \
    | xargs -0 -r grep -qs "Failed to initialize distributed job cluster"; then
  echo "error: the job did not form within JOIN_TIMEOUT=${JOIN_TIMEOUT}s: not all $WORKERS processes joined (each" \
       "of the $NODES node(s) runs this command with its NODE_RANK and the same MASTER_ADDR and MASTER_PORT);" \
       "$again" >&2
  exit 1
fi
if [[ -n "$stopping" ]]; then
  echo "stopped by a signal: every rank saved or stopped; $again" >&2
  exit 130
fi
if [[ "$failed" == scheduler ]]; then
  echo "error: msrun's scheduler (pid $SCHED) died while the ranks trained; every rank stopped; $again" >&2
  exit 1
fi
pid=$(awk '{print $3}' <<< "$failed")
code=${failed##* }
rank=${RANK_OF[$pid]:-unknown}
if (( code < 0 )); then how="was killed by signal $(( -code ))"; else how="exited with status $code"; fi
log="$LOG_DIR/worker_$rank.log"
reason=$(grep '^error: ' "$log" 2>/dev/null | tail -n 1 | cut -c1-200 || true)  # train.py's one-line error
[[ -n "$reason" ]] && how="$how ($reason)"
echo "error: rank $rank (pid $pid) $how; every rank stopped; its log: $log; $again" >&2
exit 1
