/*
 * The smallest useful Open MPI job: every rank passes a token around a ring
 * and joins an allreduce; rank 0 prints one line. Run by packaging/deb-check.sh
 * over the installed rustfab package, with the man page's command line.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size, token = -1, sum = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	if (rank == 0) {
		token = 42;
		MPI_Send(&token, 1, MPI_INT, next, 0, MPI_COMM_WORLD);
		MPI_Recv(&token, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else {
		MPI_Recv(&token, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Send(&token, 1, MPI_INT, next, 0, MPI_COMM_WORLD);
	}
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	int ok = token == 42 && sum == size * (size - 1) / 2;
	if (rank == 0)
		printf("mpi hello: %d ranks, ring and allreduce %s\n", size, ok ? "ok" : "WRONG");
	MPI_Finalize();
	return ok ? 0 : 1;
}
