#!/usr/bin/env bash
# Data-parallel training with msrun (MindSpore's launcher); extra arguments go to train.py.
#
#   bash scripts/run_distributed.sh 2                          # 2 processes on this host
#   bash scripts/run_distributed.sh 8 --set train.epochs=3
#   NODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 bash scripts/run_distributed.sh 8   # on each node
#
# WORKERS is the total number of processes (all nodes); each node starts WORKERS/NODES.
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS=${1:-2}
shift $(( $# > 0 ? 1 : 0 ))
NODES=${NODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
MASTER_PORT=${MASTER_PORT:-8118}
LOG_DIR=${LOG_DIR:-msrun_log}

if (( WORKERS % NODES != 0 )); then
  echo "error: WORKERS=$WORKERS is not divisible by NODES=$NODES" >&2
  exit 2
fi
# msrun starts workers as plain `python train.py`: put the environment in use (or $PYTHON's) first on PATH.
PYTHON_BIN=$("${PYTHON:-python}" -c 'import os, sys; print(os.path.dirname(sys.executable))')
export PATH="$PYTHON_BIN:$PATH"

exec msrun --worker_num="$WORKERS" --local_worker_num=$(( WORKERS / NODES )) \
  --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" \
  --log_dir="$LOG_DIR" --join=True train.py "$@"
