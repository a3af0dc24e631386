#!/usr/bin/env bash
# Diagnosis on the device: a run that takes too long (a test stuck in the judge) shows where.
# usage: dump_stacks.sh DELAY1 DELAY2 OUTFILE : at each delay, every reference worker dumps its stacks; threads listed
for d in "$1" "$2"; do
  sleep "$d"
  { echo "=== $(date -u +%T)"; ps -eLo pid,tid,psr,stat,pcpu,wchan:24,args --sort=-pcpu | grep -v " ps \|grep" | head -40; } >> "$3"
  pkill -USR1 -f cuda_gym.judge.reference_worker
done
