#!/bin/sh
# Open MPI's rsh agent for "hosts" that are network namespaces
# (mpirun --mca plm_rsh_agent /path/agent.sh). mpirun calls it as ssh:
#   agent.sh HOST WORD...
# and it runs the words as one shell command line in host HOST, which is a
# network namespace of that name (made by c-tests/mpi-hosts/run.sh), with a
# mount and UTS namespace of its own: the hostname is HOST and /dev/shm is a
# fresh tmpfs. Everything the command starts (orted, then its ranks)
# inherits these, so the ranks of one host share a mount namespace and thus
# rustfab's auto host id, and ranks on different hosts do not (and could not
# share memory even if they tried: their /dev/shm are different file systems).
#
# On a real cluster the agent is ssh and none of this is needed.
set -eu
host=$1
shift
exec ip netns exec "$host" unshare --mount --uts --propagation private \
	sh -c 'hostname "$0" && mount -t tmpfs -o mode=1777,size=1g rf-shm /dev/shm && exec sh -c "$1"' \
	"$host" "$*"
