/*
 * shm transport specifics, through the public API plus direct looks at
 * /dev/shm: the segment's mode, owner and cleanup, cross-process transfers
 * (CMA and the copy-through fallback), a peer killed mid-transfer, and a
 * hostile process scribbling on an endpoint's segment.
 */
#include "rdm_common.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

static int seg_path(const struct end *e, char *path, size_t n)
{
	/* "fi_rustfab_shm://<16 hex>" → /dev/shm/rustfab-<uid>-<16 hex> */
	const char *p = strstr(e->addr, "://");
	if (!p)
		return -1;
	snprintf(path, n, "/dev/shm/rustfab-%u-%s", (unsigned)geteuid(), p + 3);
	return 0;
}

TEST(segment_private_and_removed_on_close)
{
	struct end e;
	struct stat st;
	char path[256];
	struct end_opts o = {0};
	CHECK_OK(end_open(&e, &o));
	CHECK_EQ(seg_path(&e, path, sizeof path), 0);
	CHECK_EQ(stat(path, &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0600);
	CHECK_EQ(st.st_uid, geteuid());
	end_close(&e);
	CHECK(stat(path, &st) != 0 && errno == ENOENT);
}

TEST(segment_removed_at_normal_exit_without_close)
{
	int fds[2];
	char path[256] = {0};
	CHECK_EQ(pipe(fds), 0);
	pid_t pid = rf_fork();
	if (pid == 0) {
		struct end e;
		struct end_opts o = {0};
		if (end_open(&e, &o))
			_exit(3);
		seg_path(&e, path, sizeof path);
		if (write(fds[1], path, sizeof path) != sizeof path)
			_exit(4);
		exit(0); /* no fi_close: libc exit runs atexit handlers */
	}
	CHECK_EQ(read(fds[0], path, sizeof path), (ssize_t)sizeof path);
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct stat sb;
	CHECK(path[0] == '/');
	CHECK(stat(path, &sb) != 0);
	close(fds[0]);
	close(fds[1]);
}

/* Child: an end that receives one message of `len` bytes and checks it. */
static int child_receiver(int rfd, int wfd, size_t len, int die_before_recv)
{
	struct end e;
	struct end_opts o = {0};
	if (end_open(&e, &o))
		return 10;
	if (write(wfd, &e.addrlen, sizeof e.addrlen) != sizeof e.addrlen || write(wfd, e.addr, e.addrlen) != (ssize_t)e.addrlen)
		return 11;
	if (die_before_recv) {
		for (;;)
			pause(); /* the parent kills us */
	}
	char *buf = malloc(len);
	struct fi_cq_tagged_entry c;
	if (fi_recv(e.ep, buf, len, NULL, FI_ADDR_UNSPEC, NULL))
		return 12;
	if (wait_comp(&e, NULL, &c, NULL, NULL, 30) != 1)
		return 13;
	int ok = c.len == len && check_fill(buf, len, 9);
	char done = 1;
	if (write(wfd, &done, 1) != 1)
		return 14;
	(void)rfd;
	free(buf);
	end_close(&e);
	return ok ? 0 : 15;
}

static void cross_process(size_t len, int cma)
{
	int p2c[2], c2p[2];
	CHECK_EQ(pipe(p2c), 0);
	CHECK_EQ(pipe(c2p), 0);
	if (!cma)
		setenv("FI_RUSTFAB_SHM_CMA", "0", 1);
	pid_t pid = rf_fork();
	if (pid == 0)
		_exit(child_receiver(p2c[0], c2p[1], len, 0));
	struct end a;
	struct end_opts o = {0};
	CHECK_OK(end_open(&a, &o));
	unsetenv("FI_RUSTFAB_SHM_CMA");
	char peer[128];
	size_t plen;
	CHECK_EQ(read(c2p[0], &plen, sizeof plen), (ssize_t)sizeof plen);
	CHECK_EQ(read(c2p[0], peer, plen), (ssize_t)plen);
	CHECK_EQ(fi_av_insert(a.av, peer, 1, &a.peer, 0, NULL), 1);
	char *buf = malloc(len);
	fill(buf, len, 9);
	struct fi_cq_tagged_entry c;
	CHECK_OK(POST(fi_send(a.ep, buf, len, NULL, a.peer, (void *)0x5), &a, NULL));
	CHECK_EQ(wait_comp(&a, NULL, &c, NULL, NULL, 30), 1);
	char done;
	CHECK_EQ(read(c2p[0], &done, 1), 1);
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	free(buf);
	end_close(&a);
}

TEST(cross_process_large_cma)
{
	cross_process((32u << 20) + 7, 1);
}

TEST(cross_process_large_copy_through)
{
	cross_process((8u << 20) + 3, 0);
}

TEST(peer_killed_mid_transfer)
{
	/* The receiver dies before taking a rendezvous message: the sender's
	 * operation completes with an error within a few seconds. */
	int p2c[2], c2p[2];
	CHECK_EQ(pipe(p2c), 0);
	CHECK_EQ(pipe(c2p), 0);
	size_t len = 8u << 20;
	pid_t pid = rf_fork();
	if (pid == 0)
		_exit(child_receiver(p2c[0], c2p[1], len, 1));
	struct end a;
	struct end_opts o = {0};
	CHECK_OK(end_open(&a, &o));
	char peer[128];
	size_t plen;
	CHECK_EQ(read(c2p[0], &plen, sizeof plen), (ssize_t)sizeof plen);
	CHECK_EQ(read(c2p[0], peer, plen), (ssize_t)plen);
	CHECK_EQ(fi_av_insert(a.av, peer, 1, &a.peer, 0, NULL), 1);
	char *buf = malloc(len);
	fill(buf, len, 9);
	CHECK_OK(POST(fi_send(a.ep, buf, len, NULL, a.peer, (void *)0x6), &a, NULL));
	usleep(100000);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	double t0 = now_sec();
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	int w = wait_comp(&a, NULL, &c, &err, NULL, 10);
	double dt = now_sec() - t0;
	CHECK_EQ(w, -FI_EAVAIL);
	CHECK(err.op_context == (void *)0x6);
	CHECK(err.err == FI_ECONNRESET || err.err == FI_EIO || err.err == FI_ECANCELED);
	CHECK(dt < 5);
	/* Later sends to the dead peer fail too (error, not a hang). */
	ssize_t r = fi_send(a.ep, buf, 64, NULL, a.peer, (void *)0x7);
	if (r == 0) {
		CHECK_EQ(wait_comp(&a, NULL, &c, &err, NULL, 10), -FI_EAVAIL);
	} else {
		CHECK(r < 0 && r != -FI_EAGAIN);
	}
	free(buf);
	end_close(&a);
	/* The killed peer could not unlink its segment; the next rustfab
	 * process of this user sweeps it (owner pid + start time are gone). */
	struct end dead = {0};
	memcpy(dead.addr, peer, plen);
	char path[256];
	struct stat sb;
	CHECK_EQ(seg_path(&dead, path, sizeof path), 0);
	CHECK_EQ(stat(path, &sb), 0);
	/* This program's path, not exec("/proc/self/exe"): under valgrind
	 * (make memcheck) that names valgrind's tool, while readlink gives the
	 * program's own path there too. */
	char self[4096];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
	CHECK(sl > 0);
	self[sl] = 0;
	pid = rf_fork();
	if (pid == 0) {
		/* a fresh process (exec), as a later application run would be */
		execl(self, "test_shm", "--open-one-end", (char *)NULL);
		_exit(2);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(stat(path, &sb) != 0 && errno == ENOENT);
}

/*
 * A process of the same user maps an endpoint's segment and writes a
 * claimed slot with a garbage record. The endpoint must cut off only that
 * "peer": a healthy peer keeps working, nothing crashes or hangs.
 */
TEST(hostile_segment_contents)
{
	struct end_opts o = {0};
	struct end A, B;
	CHECK_OK(end_open(&A, &o));
	CHECK_OK(end_open(&B, &o));
	CHECK_OK(ends_connect(&A, &B));
	char path[256];
	CHECK_EQ(seg_path(&B, path, sizeof path), 0);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	struct stat st;
	CHECK_EQ(fstat(fd, &st), 0);
	unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	close(fd);
	/* Layout (docs/shm.md "Segments"): the slots' 64-byte control lines
	 * from 4096, the rings from 4096 + 256 * 64, each in pages of its own;
	 * take the last slot so real peers are not disturbed. */
	size_t nslots = 256, ctl_area = 4096 + nslots * 64;
	size_t ring_stride = (size_t)(st.st_size - ctl_area) / nslots;
	unsigned char *slot = m + 4096 + (nslots - 1) * 64;
	volatile uint64_t *state = (uint64_t *)slot;
	*(uint64_t *)(slot + 8) = 0x1234;     /* sender token */
	*(uint64_t *)(slot + 16) = getpid(); /* sender pid */
	unsigned char *ring = m + ctl_area + (nslots - 1) * ring_stride;
	memset(ring + 128, 0xff, 64 * 4);   /* garbage "record" */
	*(volatile uint64_t *)(ring) = 4;   /* tail: 4 cells published */
	*(volatile uint64_t *)(ring + 64) = 0;
	*state = 2;                          /* ACTIVE */
	__atomic_fetch_add((uint64_t *)(m + 128), 1, __ATOMIC_SEQ_CST); /* claim_seq */
	/* and a second one with absurd indices */
	unsigned char *slot2 = m + 4096 + (nslots - 2) * 64;
	unsigned char *ring2 = m + ctl_area + (nslots - 2) * ring_stride;
	*(uint64_t *)(slot2 + 8) = 0x5678;
	*(volatile uint64_t *)ring2 = ~0ULL; /* tail far beyond head */
	*(volatile uint64_t *)slot2 = 2;
	__atomic_fetch_add((uint64_t *)(m + 128), 1, __ATOMIC_SEQ_CST);
	/* B keeps working with A */
	char tx[100], rx[100];
	struct fi_cq_tagged_entry c;
	for (int i = 0; i < 50; i++) {
		fill(tx, sizeof tx, i);
		CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
		CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
		CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 10), 1);
		CHECK(check_fill(rx, sizeof rx, i));
		CHECK_EQ(wait_comp(&A, &B, &c, NULL, NULL, 10), 1);
	}
	munmap(m, (size_t)st.st_size);
	end_close(&A);
	end_close(&B);
}

/* One new sender: opens, sends `B` one message, closes; 0, or the first
 * failing post's error (a negative FI_E* code), or 1 if nothing arrived. */
static int new_sender_to(struct end *B, int seed)
{
	struct end_opts o = {0};
	struct end S;
	char tx[100], rx[100];
	struct fi_cq_tagged_entry c;
	int r = end_open(&S, &o);
	if (!r)
		r = ends_connect(&S, B);
	if (!r) {
		fill(tx, sizeof tx, seed);
		r = (int)POST(fi_send(S.ep, tx, sizeof tx, NULL, S.peer, NULL), &S, B);
		if (!r)
			r = (int)fi_recv(B->ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL);
		if (!r)
			r = wait_comp(B, &S, &c, NULL, NULL, 10) == 1 && check_fill(rx, sizeof rx, seed) ? 0 : 1;
	}
	end_close(&S);
	return r;
}

/*
 * Garbage a same-user process writes into an endpoint's segment where no
 * sender is yet (docs/security.md "Same user"): at the start of every
 * unclaimed ring (a stale head and records), in slots' control lines (a
 * state none of ours; a closed slot with an abort word no sender writes),
 * then in the header. New senders still get through the ring garbage (each
 * claimer resets its ring) and the control-line garbage; the header's makes
 * them fail clearly (-FI_EADDRNOTAVAIL) until the owner rewrites it, within
 * its next few thousand progress passes; a sender that was there before
 * goes on throughout.
 */
TEST(hostile_garbage_before_claims)
{
	struct end_opts o = {0};
	struct end A, B;
	CHECK_OK(end_open(&A, &o));
	CHECK_OK(end_open(&B, &o));
	CHECK_OK(ends_connect(&A, &B));
	char tx[100], rx[100];
	struct fi_cq_tagged_entry c;
	fill(tx, sizeof tx, 1);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 10), 1);
	char path[256];
	CHECK_EQ(seg_path(&B, path, sizeof path), 0);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	struct stat st;
	CHECK_EQ(fstat(fd, &st), 0);
	unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	close(fd);
	size_t nslots = 256, ctl_area = 4096 + nslots * 64;
	size_t stride = (size_t)(st.st_size - ctl_area) / nslots;
	/* Every free slot's ring: its first 4 KiB (the unused word, the head,
	 * 62 cells) 0xa5 bytes but for first words that read as records. */
	for (size_t i = 0; i < nslots; i++) {
		uint64_t w = __atomic_load_n((uint64_t *)(m + 4096 + i * 64), __ATOMIC_ACQUIRE);
		if ((w & 0xff) != 0)
			continue;
		unsigned char *r = m + ctl_area + i * stride;
		memset(r, 0xa5, 4096);
		for (size_t k = 128; k < 4096; k += 64) {
			uint64_t rec = 0x5246 | (uint64_t)1 << 16 | (uint64_t)k << 24;
			memcpy(r + k, &rec, 8);
		}
	}
	/* Control lines of two free slots at the end. */
	uint64_t junk = 0x5a5a5a5a5a5a5a5aull;
	uint64_t *l1 = (uint64_t *)(m + 4096 + (nslots - 1) * 64), *l2 = (uint64_t *)(m + 4096 + (nslots - 2) * 64);
	uint64_t closed_line[8] = {3 | 7 << 8 | (uint64_t)getpid() << 32, junk, (uint64_t)getpid(), 1, 0, 0xdeadbeef, junk, junk};
	for (int k = 7; k >= 0; k--)
		__atomic_store_n(&l1[k], closed_line[k], __ATOMIC_RELEASE);
	for (int k = 7; k >= 0; k--)
		__atomic_store_n(&l2[k], k ? junk : 0xff | junk << 8, __ATOMIC_RELEASE);
	__atomic_fetch_add((uint64_t *)(m + 128), 1, __ATOMIC_SEQ_CST); /* claim_seq */
	int bad = 0;
	for (int i = 0; i < 20; i++) {
		int r = new_sender_to(&B, 10 + i);
		if (r) {
			printf("    new sender %d after ring and control garbage: %d (%s)\n", i, r, fi_strerror(-r));
			bad++;
		}
	}
	CHECK_EQ(bad, 0);
	/* The header: a new sender is refused, clearly; A goes on. */
	uint64_t saved[6];
	memcpy(saved, m, sizeof saved);
	for (int k = 0; k < 6; k++)
		__atomic_store_n((uint64_t *)m + k, junk, __ATOMIC_RELEASE);
	CHECK_EQ(new_sender_to(&B, 40), -FI_EADDRNOTAVAIL);
	fill(tx, sizeof tx, 2);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 10), 1);
	CHECK(check_fill(rx, sizeof rx, 2));
	/* The owner rewrites it as it progresses. */
	double deadline = now_sec() + 5 * rf_time_scale();
	while (memcmp(saved, m, sizeof saved) && now_sec() < deadline)
		poke1(&B);
	CHECK(!memcmp(saved, m, sizeof saved));
	CHECK_EQ(new_sender_to(&B, 41), 0);
	munmap(m, (size_t)st.st_size);
	end_close(&A);
	end_close(&B);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--open-one-end")) {
		struct end e;
		struct end_opts o = {0};
		int r = end_open(&e, &o);
		end_close(&e);
		return r ? 1 : 0;
	}
	harness_init(argc, argv);
	setenv("RF_TRANSPORT", "shm", 1);
	RUN(segment_private_and_removed_on_close);
	RUN(segment_removed_at_normal_exit_without_close);
	RUN(cross_process_large_cma);
	RUN(cross_process_large_copy_through);
	RUN(peer_killed_mid_transfer);
	RUN(hostile_segment_contents);
	RUN(hostile_garbage_before_claims);
	return harness_done();
}
