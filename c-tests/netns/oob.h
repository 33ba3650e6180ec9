/*
 * The control channel of the two-namespace tests: a pair of FIFOs between
 * the server and the client process (created by c-tests/netns/run.sh),
 * used to exchange addresses and to meet at the same point.
 */
#ifndef RUSTFAB_NETNS_OOB_H
#define RUSTFAB_NETNS_OOB_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int to_peer = -1, from_peer = -1;

/* Opens the FIFOs (the order avoids a deadlock between the two ends). */
static int oob_open(int server, const char *to, const char *from)
{
	if (server) {
		to_peer = open(to, O_WRONLY);
		from_peer = open(from, O_RDONLY);
	} else {
		from_peer = open(from, O_RDONLY);
		to_peer = open(to, O_WRONLY);
	}
	if (to_peer < 0 || from_peer < 0) {
		perror("open fifo");
		return -1;
	}
	return 0;
}

static void oob_write(const void *p, size_t n)
{
	if (write(to_peer, p, n) != (ssize_t)n) {
		printf("control channel closed (write)\n");
		exit(2);
	}
}

static void oob_read(void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(from_peer, (char *)p + got, n - got);
		if (r <= 0) {
			printf("control channel closed (read)\n");
			exit(2);
		}
		got += (size_t)r;
	}
}

static inline void send_u64(uint64_t v)
{
	oob_write(&v, sizeof v);
}

static inline uint64_t recv_u64(void)
{
	uint64_t v;
	oob_read(&v, sizeof v);
	return v;
}

/* Both processes reach this point. */
static void sync_peer(void)
{
	char c = 's';
	oob_write(&c, 1);
	oob_read(&c, 1);
}

#endif
