/*
 * shm security (issue 12, docs/security.md "Shared memory"): hostile and
 * crashed peers of the same host, speaking to an endpoint's segment and
 * doorbell directly (the layout of docs/shm.md, segment version 6; its slots
 * and rings are those of version 3).
 *
 *  - crashed senders: 300 processes claim a slot in an endpoint's segment
 *    and _exit without closing (30 processes of 10 claims under valgrind) (plus two real rustfab senders that _exit
 *    after sending); a new sender must still get a slot.
 *  - forged CMA pid: a process writes a rendezvous request whose slot names
 *    the receiver's own pid and whose address is a secret of the receiver:
 *    the receiver must never copy its own memory into the receive.
 *  - doorbell: a socket file in a directory of ours, mode 0700; datagrams of
 *    the same user (garbage, forged announcements) cost nothing; another
 *    uid (as root: setresuid 65534) can neither ring it nor open the segment.
 *  - addresses: an endpoint asked for a live endpoint's address fails with
 *    -FI_EADDRINUSE; one asked for a killed endpoint's address takes it over
 *    and gets traffic (shm and auto).
 */
#define _GNU_SOURCE
#include "rdm_common.h"
#include <dirent.h>
#include <grp.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#define NSLOTS 256
/* docs/shm.md "Segments": the header (4 KiB), the slots' control lines (64
 * bytes each), then the rings, each in pages of its own. */
#define SEG_HDR 4096
#define SLOT_CTL 64
#define CTL_AREA (SEG_HDR + NSLOTS * SLOT_CTL)
#define H_CLAIM_SEQ 128
#define SLOT_FREE 0
#define SLOT_CLAIMED 1
#define SLOT_ACTIVE 2

/* "...://<16 hex>" (shm) or the 16 hex digits of the shm token inside an
 * auto address (after the host's 16). */
static const char *token_of(const char *addr)
{
	const char *p = strstr(addr, "://");
	if (!p)
		return NULL;
	p += 3;
	if (!strncmp(addr, "fi_rustfab://", 13))
		p += 16;
	return p;
}

static void seg_path(const char *addr, char *path, size_t n)
{
	snprintf(path, n, "/dev/shm/rustfab-%u-%.16s", (unsigned)geteuid(), token_of(addr));
}

static void bell_path(const char *addr, char *path, size_t n)
{
	snprintf(path, n, "/dev/shm/rustfab-%u/%.16s", (unsigned)geteuid(), token_of(addr));
}

static unsigned long long start_time_of(pid_t pid)
{
	char p[64], buf[1024];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *s = strrchr(buf, ')');
	if (!s)
		return 0;
	s += 2;
	/* field 3 is at s; starttime is field 22 */
	for (int f = 3; f < 22 && s; f++) {
		s = strchr(s, ' ');
		if (s)
			s++;
	}
	return s ? strtoull(s, NULL, 10) : 0;
}

struct seg {
	unsigned char *m;
	size_t len;
};

static int seg_map(const char *addr, struct seg *s)
{
	char path[256];
	struct stat st;
	seg_path(addr, path, sizeof path);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st)) {
		close(fd);
		return -1;
	}
	s->len = (size_t)st.st_size;
	s->m = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return s->m == MAP_FAILED ? -1 : 0;
}

/* Slot i's control line. */
static unsigned char *slot_at(struct seg *s, int i)
{
	return s->m + SEG_HDR + (size_t)i * SLOT_CTL;
}

/* Slot i's ring (its control words, then the cells). */
static unsigned char *ring_at(struct seg *s, int i)
{
	size_t stride = (s->len - CTL_AREA) / NSLOTS;
	return s->m + CTL_AREA + (size_t)i * stride;
}

/* The claim protocol of docs/shm.md: CAS a free slot's state word to
 * CLAIMED | gen << 8 | pid << 32, write token/pid/start, activate, bump
 * claim_seq. No free slot: bump claim_seq (the owner then looks for dead
 * senders) and report -1. */
static int claim(struct seg *s, uint64_t token, pid_t pid, unsigned long long start)
{
	for (int i = 0; i < NSLOTS; i++) {
		unsigned char *sl = slot_at(s, i);
		uint64_t *w = (uint64_t *)sl;
		uint64_t cur = __atomic_load_n(w, __ATOMIC_ACQUIRE);
		if ((cur & 0xff) != SLOT_FREE)
			continue;
		uint64_t gen = ((cur >> 8) + 1) & 0xffffff;
		uint64_t want = SLOT_CLAIMED | gen << 8 | (uint64_t)(uint32_t)pid << 32;
		if (!__atomic_compare_exchange_n(w, &cur, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		__atomic_store_n((uint64_t *)(sl + 8), token, __ATOMIC_RELAXED);
		__atomic_store_n((uint64_t *)(sl + 16), (uint64_t)(uint32_t)pid, __ATOMIC_RELAXED);
		__atomic_store_n((uint64_t *)(sl + 24), (uint64_t)start, __ATOMIC_RELAXED);
		/* ring: (unused word) at +0, head at +64, cells from +128 */
		unsigned char *r = ring_at(s, i);
		__atomic_store_n((uint64_t *)r, 0, __ATOMIC_RELAXED);
		__atomic_store_n((uint64_t *)(r + 64), 0, __ATOMIC_RELAXED);
		__atomic_store_n(w, SLOT_ACTIVE | gen << 8 | (uint64_t)(uint32_t)pid << 32, __ATOMIC_RELEASE);
		__atomic_fetch_add((uint64_t *)(s->m + H_CLAIM_SEQ), 1, __ATOMIC_SEQ_CST);
		return i;
	}
	__atomic_fetch_add((uint64_t *)(s->m + H_CLAIM_SEQ), 1, __ATOMIC_SEQ_CST);
	return -1;
}

/* Waits for child `pid` while progressing `e`; its exit status or -1. */
static int reap_progressing(pid_t pid, struct end *e, double secs)
{
	double deadline = now_sec() + secs * rf_time_scale();
	int st;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (now_sec() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		poke1(e);
		usleep(200);
	}
}

/* One message A → B of `len` bytes, checked. */
static int one_message(struct end *a, fi_addr_t to, struct end *b, int seed)
{
	char tx[256], rx[256];
	struct fi_cq_tagged_entry c;
	fill(tx, sizeof tx, seed);
	memset(rx, 0, sizeof rx);
	if (fi_recv(b->ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL))
		return -1;
	if (POST(fi_send(a->ep, tx, sizeof tx, NULL, to, NULL), a, b))
		return -2;
	if (wait_comp(b, a, &c, NULL, NULL, 10) != 1)
		return -3;
	if (wait_comp(a, b, &c, NULL, NULL, 10) != 1)
		return -4;
	return check_fill(rx, sizeof rx, seed) ? 0 : -5;
}

TEST(crashed_senders_slots_reclaimed)
{
	struct end_opts o = {0};
	struct end B;
	CHECK_OK(end_open(&B, &o));
	/* Two real senders that send one message each and die without
	 * fi_close (their claims were announced: kernel-verified identity). */
	for (int i = 0; i < 2; i++) {
		pid_t pid = rf_fork();
		if (pid == 0) {
			struct end a;
			char tx[64];
			if (end_open(&a, &o))
				_exit(2);
			fi_addr_t to;
			if (fi_av_insert(a.av, B.addr, 1, &to, 0, NULL) != 1)
				_exit(3);
			fill(tx, sizeof tx, i);
			if (POST(fi_inject(a.ep, tx, sizeof tx, to), &a, NULL))
				_exit(4);
			_exit(0);
		}
		CHECK_EQ(reap_progressing(pid, &B, 30), 0);
	}
	/* 300 raw claims by processes that die holding their slot: one each
	 * (under valgrind, make memcheck: ten each, so 30 processes). */
	int per = rf_time_scale() > 1 ? 10 : 1;
	int crashed = 0;
	for (int i = 0; i < 300 / per; i++) {
		pid_t pid = rf_fork();
		if (pid == 0) {
			struct seg s;
			if (seg_map(B.addr, &s))
				_exit(2);
			unsigned long long st = start_time_of(getpid());
			double deadline = now_sec() + 10 * rf_time_scale();
			for (int k = 0; k < per; k++) {
				while (claim(&s, 0x5eed0000u + (unsigned)(i * per + k), getpid(), st) < 0) {
					if (now_sec() > deadline)
						_exit(3); /* no slot ever freed */
					usleep(1000);
				}
			}
			_exit(0);
		}
		int r = reap_progressing(pid, &B, 30);
		if (r != 0) {
			printf("    crashed sender %d: no slot (status %d)\n", i * per, r);
			break;
		}
		crashed += per;
	}
	CHECK_EQ(crashed, 300);
	/* The real senders' messages were delivered (unexpected, in order). */
	char rx[64];
	struct fi_cq_tagged_entry c;
	for (int i = 0; i < 2; i++) {
		CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
		CHECK_EQ(wait_comp(&B, NULL, &c, NULL, NULL, 10), 1);
		CHECK_EQ(c.len, sizeof rx);
		CHECK(check_fill(rx, sizeof rx, i));
	}
	/* A new sender still connects and its message arrives. */
	struct end A;
	CHECK_OK(end_open(&A, &o));
	CHECK_OK(ends_connect(&A, &B));
	CHECK_EQ(one_message(&A, A.peer, &B, 7), 0);
	end_close(&A);
	end_close(&B);
}

/*
 * A same-user process claims a slot saying it is the receiver itself (its
 * pid and start time) and writes a rendezvous request (CMA allowed) for a
 * buffer at the address of the receiver's secret. Before issue 12 the
 * receiver read its own memory into the receive; now records report only a
 * kernel-verified pid (none here), so the message can only be streamed by
 * the (absent) sender.
 */
TEST(forged_cma_pid)
{
	struct end_opts o = {0};
	struct end B;
	CHECK_OK(end_open(&B, &o));
	size_t len = 64 * 1024;
	char *secret = malloc(len), *rx = calloc(1, len);
	CHECK(secret && rx);
	memset(secret, 'S', len);
	CHECK_OK(fi_recv(B.ep, rx, len, NULL, FI_ADDR_UNSPEC, (void *)0x77));
	pid_t victim = getpid();
	unsigned long long vstart = start_time_of(victim);
	pid_t pid = rf_fork();
	if (pid == 0) {
		struct seg s;
		if (seg_map(B.addr, &s))
			_exit(2);
		int i = claim(&s, 0x0f0f0f0f0f0f0f0full, victim, vstart);
		if (i < 0)
			_exit(3);
		unsigned char *cells = ring_at(&s, i) + 128;
		unsigned char rec[64 + 16] = {0};
		uint16_t magic = 0x5246;
		memcpy(rec, &magic, 2);
		rec[2] = 1; /* version */
		rec[3] = 2; /* RTS */
		uint32_t flags = 1u << 3; /* CMA_OK */
		memcpy(rec + 4, &flags, 4);
		uint64_t l = len, id = 1, off = 0;
		memcpy(rec + 8, &l, 8);
		memcpy(rec + 32, &id, 8);
		memcpy(rec + 40, &off, 8);
		uint32_t payload = 16, aux = 1;
		memcpy(rec + 48, &payload, 4);
		memcpy(rec + 52, &aux, 4);
		uint64_t a = (uint64_t)(uintptr_t)secret; /* same layout: forked */
		memcpy(rec + 64, &a, 8);
		memcpy(rec + 72, &l, 8);
		/* Publication (docs/shm.md "Rings"): everything but the record's
		 * first word, then that word (the magic; at index 0, lap 0's tag:
		 * top 16 bits zero) with a SeqCst store. */
		memcpy(cells + 8, rec + 8, sizeof rec - 8);
		uint64_t first;
		memcpy(&first, rec, 8);
		__atomic_store_n((uint64_t *)cells, first, __ATOMIC_SEQ_CST);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* Progress B for a while: whatever it does, no secret byte lands. */
	double end = now_sec() + 1.0 * rf_time_scale();
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	int completed = 0;
	while (now_sec() < end) {
		ssize_t r = fi_cq_read(B.cq, &c, 1);
		if (r == 1)
			completed = 1;
		else if (r == -FI_EAVAIL && fi_cq_readerr(B.cq, &err, 0) == 1)
			completed = -1;
		usleep(1000);
	}
	size_t leaked = 0;
	for (size_t k = 0; k < len; k++)
		leaked += rx[k] == 'S';
	if (leaked)
		printf("    %zu bytes of the receiver's own memory copied into the receive\n", leaked);
	CHECK_EQ(leaked, 0);
	CHECK(completed != 1);
	end_close(&B);
	free(secret);
	free(rx);
}

/* Sends `n` bytes to the socket file `path`; 0 or -errno. */
static int send_to(const char *path, const void *b, size_t n)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	ssize_t r = sendto(fd, b, n, 0, (struct sockaddr *)&sa, sizeof sa);
	int e = r < 0 ? -errno : 0;
	close(fd);
	return e;
}

TEST(doorbell_private_and_foreign_writes_harmless)
{
	struct end_opts o = {0};
	struct end A, B;
	CHECK_OK(end_open(&A, &o));
	CHECK_OK(end_open(&B, &o));
	CHECK_OK(ends_connect(&A, &B));
	char path[256], dir[256];
	bell_path(B.addr, path, sizeof path);
	snprintf(dir, sizeof dir, "/dev/shm/rustfab-%u", (unsigned)geteuid());
	struct stat st;
	CHECK_EQ(lstat(dir, &st), 0);
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_mode & 0777, 0700);
	CHECK_EQ(st.st_uid, geteuid());
	CHECK_EQ(lstat(path, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	/* Same user: garbage, and announcements naming every slot (forged:
	 * the kernel says who sent them), in floods, while A and B talk. */
	uint64_t hello[4] = {0x3149484d48535246ull /* "RFSHMHI1" */, 0, 0, 0x1234};
	char tok[17] = {0};
	memcpy(tok, token_of(B.addr), 16);
	hello[1] = strtoull(tok, NULL, 16);
	for (int round = 0; round < 20; round++) {
		for (int k = 0; k < 50; k++) {
			char junk[64];
			fill(junk, sizeof junk, k);
			send_to(path, junk, (size_t)(k % 64) + 1);
			hello[2] = (uint64_t)(k % NSLOTS) | (uint64_t)k << 32;
			send_to(path, hello, sizeof hello);
		}
		CHECK_EQ(one_message(&A, A.peer, &B, round), 0);
	}
	/* Another uid: cannot ring the doorbell nor open the segment. */
	if (geteuid() != 0) {
		printf("    SKIP other-uid part: needs root to become uid 65534\n");
	} else {
		char seg[256];
		seg_path(B.addr, seg, sizeof seg);
		pid_t pid = rf_fork();
		if (pid == 0) {
			if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
				_exit(2);
			char b = 1;
			int r = send_to(path, &b, 1);
			if (r != -EACCES)
				_exit(3);
			if (open(seg, O_RDWR) >= 0 || open(seg, O_RDONLY) >= 0)
				_exit(4);
			/* and the name of its directory cannot be listed */
			if (opendir(dir))
				_exit(5);
			_exit(0);
		}
		int s;
		waitpid(pid, &s, 0);
		if (!WIFEXITED(s) || WEXITSTATUS(s) != 0)
			printf("    other uid: step %d was not refused\n", WIFEXITED(s) ? WEXITSTATUS(s) : -1);
		CHECK(WIFEXITED(s) && WEXITSTATUS(s) == 0);
	}
	CHECK_EQ(one_message(&A, A.peer, &B, 99), 0);
	end_close(&A);
	end_close(&B);
}

/* With it set, open_at asks for its address with fi_setname before
 * fi_enable instead of through the hints. */
static const char *setname_to;

/* Opens an RDM endpoint of transport `tr` asking for source address `src`
 * (NULL: any) through hints->src_addr (or fi_setname, see setname_to). 0 or
 * the first failing call's error; the endpoint's name in e->addr. */
static int open_at(struct end *e, const char *tr, const char *src)
{
	const char *by_name = setname_to;
	if (by_name) {
		src = NULL;
		setname_to = NULL;
	}
	memset(e, 0, sizeof *e);
	struct fi_info *h = fi_allocinfo();
	h->fabric_attr->prov_name = strdup("rustfab");
	h->domain_attr->name = strdup(tr);
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG | FI_TAGGED;
	h->domain_attr->av_type = FI_AV_MAP;
	h->addr_format = FI_ADDR_STR;
	if (src) {
		h->src_addr = strdup(src);
		h->src_addrlen = strlen(src) + 1;
	}
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &e->info);
	fi_freeinfo(h);
	if (ret)
		return ret;
	if (src && (!e->info->src_addr || strcmp(e->info->src_addr, src)))
		return -1000; /* fi_getinfo moved the address */
	if ((ret = fi_fabric(e->info->fabric_attr, &e->fabric, NULL)) ||
	    (ret = fi_domain(e->fabric, e->info, &e->domain, NULL)))
		return ret;
	struct fi_av_attr av_attr = {.type = FI_AV_MAP};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	if ((ret = fi_av_open(e->domain, &av_attr, &e->av, NULL)) ||
	    (ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL)) ||
	    (ret = fi_endpoint(e->domain, e->info, &e->ep, NULL)) ||
	    (ret = fi_ep_bind(e->ep, &e->av->fid, 0)) ||
	    (ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV)))
		return ret;
	if (by_name && (ret = fi_setname(&e->ep->fid, (void *)by_name, strlen(by_name) + 1)))
		return ret;
	if ((ret = fi_enable(e->ep)))
		return ret;
	src = by_name ? by_name : src;
	e->addrlen = sizeof e->addr;
	if ((ret = fi_getname(&e->ep->fid, e->addr, &e->addrlen)))
		return ret;
	if (src && strcmp(e->addr, src))
		return -1001; /* opened elsewhere */
	return 0;
}

static void restart_at_same_address(const char *tr)
{
	/* A process opens an endpoint, reports its name, and is killed. */
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	pid_t pid = rf_fork();
	if (pid == 0) {
		struct end e;
		if (open_at(&e, tr, NULL))
			_exit(2);
		if (write(fds[1], e.addr, sizeof e.addr) != sizeof e.addr)
			_exit(3);
		for (;;)
			pause();
	}
	close(fds[1]);
	char name[128];
	ssize_t got = read(fds[0], name, sizeof name);
	close(fds[0]);
	if (got != (ssize_t)sizeof name)
		kill(pid, SIGKILL), waitpid(pid, NULL, 0);
	CHECK_EQ(got, (ssize_t)sizeof name);
	/* While it lives, its address is taken: a loud error, not elsewhere. */
	struct end X;
	int r = open_at(&X, tr, name);
	end_close(&X);
	CHECK_EQ(r, -FI_EADDRINUSE);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* Restart at the same address: taken over, and traffic reaches it. */
	struct end B, A;
	r = open_at(&B, tr, name);
	if (r)
		printf("    restart at %s: %d (%s)\n", name, r, fi_strerror(-r));
	CHECK_EQ(r, 0);
	CHECK(!strcmp(B.addr, name));
	CHECK_OK(open_at(&A, tr, NULL));
	CHECK_OK(ends_connect(&A, &B));
	CHECK_EQ(one_message(&A, A.peer, &B, 3), 0);
	CHECK_EQ(one_message(&B, B.peer, &A, 4), 0);
	/* And a second endpoint asking for it now fails loudly. */
	r = open_at(&X, tr, name);
	end_close(&X);
	CHECK_EQ(r, -FI_EADDRINUSE);
	end_close(&A);
	end_close(&B);
}

static void setname_exact_or_error(const char *tr)
{
	struct end A, B, X;
	CHECK_OK(open_at(&A, tr, NULL));
	/* A live endpoint's address: -FI_EADDRINUSE, nothing opened elsewhere. */
	setname_to = A.addr;
	int r = open_at(&X, tr, NULL);
	end_close(&X);
	CHECK_EQ(r, -FI_EADDRINUSE);
	/* A free address (A's, once A is gone): taken exactly. */
	char name[128];
	memcpy(name, A.addr, sizeof name);
	end_close(&A);
	setname_to = name;
	CHECK_OK(open_at(&B, tr, NULL));
	CHECK(!strcmp(B.addr, name));
	CHECK_OK(open_at(&A, tr, NULL));
	CHECK_OK(ends_connect(&A, &B));
	CHECK_EQ(one_message(&A, A.peer, &B, 5), 0);
	/* After fi_enable the address is fixed. */
	CHECK_EQ(fi_setname(&B.ep->fid, A.addr, strlen(A.addr) + 1), -FI_EOPBADSTATE);
	/* An address of the wrong kind is refused. */
	struct end Y;
	setname_to = "fi_rustfab_shm://zz";
	r = open_at(&Y, tr, NULL);
	end_close(&Y);
	CHECK_EQ(r, -FI_EINVAL);
	end_close(&A);
	end_close(&B);
}

TEST(setname_exact_or_error_shm)
{
	setname_exact_or_error("shm");
}

TEST(setname_exact_or_error_auto)
{
	setname_exact_or_error("auto");
}

TEST(restart_at_same_address_shm)
{
	restart_at_same_address("shm");
}

TEST(restart_at_same_address_auto)
{
	restart_at_same_address("auto");
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	setenv("RF_TRANSPORT", "shm", 1);
	setenv("FI_RUSTFAB_IFACE", "lo", 0);
	RUN(crashed_senders_slots_reclaimed);
	RUN(forged_cma_pid);
	RUN(doorbell_private_and_foreign_writes_harmless);
	RUN(restart_at_same_address_shm);
	RUN(restart_at_same_address_auto);
	RUN(setname_exact_or_error_shm);
	RUN(setname_exact_or_error_auto);
	return harness_done();
}
