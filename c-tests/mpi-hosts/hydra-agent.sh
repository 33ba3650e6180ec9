#!/bin/sh
# MPICH's (hydra's) launcher for "hosts" that are network namespaces
# (mpiexec -launcher ssh -launcher-exec /path/hydra-agent.sh): hydra calls
# its launcher as ssh, with ssh options (-x) before the host; they are
# dropped and the rest goes to agent.sh (HOST WORD...), as for Open MPI.
while [ $# -gt 0 ]; do
	case $1 in -*) shift ;; *) break ;; esac
done
exec "$(dirname "$0")/agent.sh" "$@"
