/*
 * rf_stress: many threads in many processes send to each other at once over
 * one rustfab transport, with random sizes, random operations and receive
 * cancellation, and every byte that arrives is checked.
 *
 *   rf_stress [-t shm|tcp|auto] [-p procs] [-n threads] [-o ops] [-d seconds]
 *             [-m max_size] [-s seed] [-T timeout] [-W grace] [-A] [-v]
 *             [-X corrupt|lose|dup]
 *
 * The parent forks `procs` peers and only coordinates them (pipes); each
 * peer opens one FI_THREAD_SAFE RDM endpoint, and its `threads` threads all
 * post on that endpoint and read its one CQ. Every thread sends up to `ops`
 * messages (or for `seconds`, whichever ends first) to random (peer,
 * thread) pairs, itself included. A message is named by its identity (sender
 * peer, sender thread, sequence number): its length (1 B .. max_size, most of
 * them small) and every byte of its payload are functions of the identity,
 * so a receiver checks both without being told. Tagged messages carry the
 * identity in their tag (plus the destination thread, which the receiving
 * thread's buffers are posted for); untagged ones carry it as remote CQ
 * data. Operations: fi_tsend, fi_tsendv, fi_tsenddata, fi_tsendmsg,
 * fi_tinject, fi_tinjectdata, fi_senddata, fi_sendmsg (FI_REMOTE_CQ_DATA),
 * fi_injectdata; receives posted with fi_trecv/fi_trecvv/fi_trecvmsg and
 * fi_recv/fi_recvv/fi_recvmsg. Whichever thread reads a completion checks
 * it (flags, length, tag or data, payload, not seen before) and reposts the
 * buffer.
 *
 * Cancellation, both kinds: "decoy" receives (a tag nobody sends) are
 * posted and cancelled, and each must complete exactly once with
 * FI_ECANCELED; and threads cancel their own live receive buffers at
 * random, which races with matching: such a buffer completes either with a
 * message (checked as usual) or with FI_ECANCELED (reposted), never both,
 * and no message may be lost for it.
 *
 * At the end the parent checks that every peer received exactly what the
 * others sent to it (per sender), that nothing failed, and prints the
 * totals. Exit status 0 only if so; any mismatch is printed (the first few
 * per peer, to stderr) and counted. The whole run is bounded by -T (default
 * 300 s), and once every send has completed everywhere the receivers wait
 * at most -W seconds (default 60) for what is still coming: a peer that
 * hangs or a message that never arrives is a failure, never a hang.
 *
 * -A asks for FI_PROGRESS_AUTO. -X plants a fault on the sending side, to
 * show that the checks catch it (make stress runs each and expects a
 * failure): "corrupt" flips a payload byte of some messages after filling
 * it, "lose" counts some messages as sent without sending them, "dup" sends
 * some messages twice under one identity.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

/* ---- identities and tags ------------------------------------------------
 * bits 63     decoy (never sent)
 *      62..56 destination thread (tags only)
 *      55..48 sender peer
 *      47..40 sender thread
 *      39..0  sequence number of the sender thread
 */
#define DECOY_BIT (1ULL << 63)
#define DST_SHIFT 56
#define DST_MASK (0x7fULL << DST_SHIFT)
#define ID_MASK ((1ULL << DST_SHIFT) - 1)
#define MAX_PROCS 64
#define MAX_THREADS 64

static inline uint64_t make_id(unsigned proc, unsigned thread, uint64_t seq)
{
	return (uint64_t)proc << 48 | (uint64_t)thread << 40 | seq;
}
static inline unsigned id_proc(uint64_t id) { return (unsigned)(id >> 48) & 0xff; }
static inline unsigned id_thread(uint64_t id) { return (unsigned)(id >> 40) & 0xff; }
static inline uint64_t id_seq(uint64_t id) { return id & ((1ULL << 40) - 1); }

static inline uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t g_seed = 1;
static size_t g_max = 4u << 20;

/* Length of message `id`: 1 B .. g_max, most of them small (60 % up to
 * 256 B, 25 % up to 16 KiB, 12 % up to 256 KiB, 3 % up to g_max), so the
 * eager, rendezvous and large-copy paths all run. */
static size_t msg_len(uint64_t id)
{
	uint64_t h = mix(id ^ g_seed);
	unsigned r = (unsigned)(h % 1000);
	uint64_t v = h >> 12;
	size_t lo, hi;
	if (r < 600)
		lo = 1, hi = 256;
	else if (r < 850)
		lo = 257, hi = 16384;
	else if (r < 970)
		lo = 16385, hi = 262144;
	else
		lo = 262145, hi = g_max;
	if (hi > g_max)
		hi = g_max;
	if (lo > hi)
		lo = 1;
	return lo + (size_t)(v % (hi - lo + 1));
}

/* Byte i of message `id`: depends on the identity and the offset, so a
 * byte from another message or another offset does not pass. */
static inline uint8_t pat(uint64_t x, size_t i)
{
	return (uint8_t)(x >> ((i & 7) << 3)) ^ (uint8_t)(i >> 3) ^ (uint8_t)(i >> 11);
}

static void fill(uint8_t *p, size_t len, uint64_t id)
{
	uint64_t x = mix(id + 0x5bd1e995);
	for (size_t i = 0; i < len; i++)
		p[i] = pat(x, i);
}

/* Offset of the first wrong byte, or -1. */
static long check(const uint8_t *p, size_t len, uint64_t id)
{
	uint64_t x = mix(id + 0x5bd1e995);
	for (size_t i = 0; i < len; i++)
		if (p[i] != pat(x, i))
			return (long)i;
	return -1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ---- options ---------------------------------------------------------- */
static const char *g_transport = "shm";
static int g_procs = 4, g_threads = 4, g_auto_progress, g_verbose;
static uint64_t g_ops = 2000;
static double g_seconds = 30, g_timeout = 300, g_grace = 60;
static enum { F_NONE, F_CORRUPT, F_LOSE, F_DUP } g_fault;

/* ---- one peer ----------------------------------------------------------- */
enum kind { K_SEND, K_TRECV, K_RECV, K_DECOY };

/* Send-operation kinds, for the totals. */
enum sop { S_TSEND, S_TSENDV, S_TSENDDATA, S_TSENDMSG, S_TINJECT, S_TINJECTDATA,
	   S_SENDDATA, S_SENDMSG, S_INJECTDATA, S_NOPS };
static const char *sop_name[S_NOPS] = {"tsend", "tsendv", "tsenddata", "tsendmsg", "tinject",
				       "tinjectdata", "senddata", "sendmsg", "injectdata"};

struct op {
	struct fi_context2 ctx; /* first: the context libfabric sees */
	enum kind kind;
	int owner;               /* thread that owns it */
	uint8_t *buf;            /* g_max bytes, mapped on first use */
	_Atomic int busy;        /* send: posted, completion pending */
	_Atomic int cancels;     /* receive: fi_cancel calls that found it posted,
				  * whose FI_ECANCELED has not come yet */
	uint64_t id;             /* send: identity of the message */
	size_t len;
	int to, which;           /* send: destination peer, enum sop */
};

#define WINDOW 8       /* sends in flight per thread */
#define TSLOTS 4       /* tagged receive buffers per thread */
#define MSLOTS 16      /* untagged receive buffers per peer */
#define DECOYS 2       /* decoy receives per thread */
#define FAIL_ERRNOS 300 /* failures counted by code below this (FI_E* codes) */

struct thr {
	int id;
	pthread_t th;
	uint64_t rng;
	struct op send[WINDOW];
	struct op tslot[TSLOTS];
	struct op decoy[DECOYS];
	uint64_t seq;
	uint64_t dupped; /* -X dup: the sequence number sent twice last */
};

static struct {
	int me;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	fi_addr_t peer[MAX_PROCS];
	size_t inject_size, iov_limit;
	struct thr thr[MAX_THREADS];
	struct op mslot[MSLOTS];
	/* per sender (peer, thread): bitmap of sequence numbers received */
	_Atomic uint64_t *seen[MAX_PROCS][MAX_THREADS];
	uint64_t seen_bits;
	/* counters */
	_Atomic uint64_t sent_to[MAX_PROCS], recv_from[MAX_PROCS];
	_Atomic uint64_t sops[S_NOPS], bytes_sent, bytes_recv, received;
	_Atomic uint64_t cancel_asked, cancel_got, cancel_late, decoy_posted, decoy_done;
	_Atomic uint64_t eagain, failures;
	_Atomic uint64_t fail_errno[FAIL_ERRNOS]; /* failures by FI_E* code */
	_Atomic int phase1_done, stop;
	_Atomic uint64_t expected; /* set in phase 2 */
	_Atomic int have_expected;
} P;

static void failf(const char *fmt, ...)
{
	uint64_t n = atomic_fetch_add(&P.failures, 1);
	if (n >= 10)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "rf_stress[peer %d]: FAIL: ", P.me);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

/* A failed operation's code, counted: failf prints only the first few. */
static void count_errno(int err)
{
	if (err > 0 && err < FAIL_ERRNOS)
		atomic_fetch_add(&P.fail_errno[err], 1);
}

/* After failures: how many of each code (one line). */
static void report_errnos(void)
{
	char line[1024];
	size_t at = 0;
	for (int e = 1; e < FAIL_ERRNOS; e++) {
		uint64_t n = atomic_load(&P.fail_errno[e]);
		if (!n)
			continue;
		int w = snprintf(line + at, sizeof line - at, " %d (%s) x%" PRIu64 ",", e, fi_strerror(e), n);
		if (w < 0 || (size_t)w >= sizeof line - at)
			break; /* the line is full: the codes so far */
		at += (size_t)w;
	}
	if (at)
		fprintf(stderr, "rf_stress[peer %d]: operations failed with:%.*s\n", P.me, (int)at - 1, line);
}

/* Phase 1 did not end by the deadline: the operations still pending. */
static void report_pending(void)
{
	int shown = 0;
	for (int t = 0; t < g_threads; t++) {
		for (int i = 0; i < WINDOW; i++) {
			struct op *o = &P.thr[t].send[i];
			if (atomic_load(&o->busy) && shown++ < 8)
				fprintf(stderr, "rf_stress[peer %d]: FAIL: a %s of %zu bytes to peer %d never completed\n",
					P.me, sop_name[o->which], o->len, o->to);
		}
		for (int i = 0; i < DECOYS; i++)
			if (atomic_load(&P.thr[t].decoy[i].busy) && shown++ < 8)
				fprintf(stderr, "rf_stress[peer %d]: FAIL: a cancelled decoy receive never completed\n",
					P.me);
	}
}

static uint8_t *buf_of(struct op *o)
{
	if (!o->buf) {
		void *p = mmap(NULL, g_max, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			exit(3);
		}
		o->buf = p;
	}
	return o->buf;
}

/* Large buffers give their pages back once used, so that many peers with
 * many 4 MiB buffers stay light on a shared machine. */
static void release_pages(struct op *o, size_t len)
{
	if (len >= (1u << 20))
		madvise(o->buf, len, MADV_DONTNEED);
}

/* Splits [buf, buf+len) into n iovecs of random sizes (some empty). */
static size_t split_iov(struct iovec *iov, size_t n, uint8_t *buf, size_t len, uint64_t *rng)
{
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		size_t take = i + 1 == n ? len - off : (len - off) ? rnd(rng) % (len - off + 1) : 0;
		iov[i].iov_base = buf + off;
		iov[i].iov_len = take;
		off += take;
	}
	return n;
}

/* ---- receives ------------------------------------------------------------ */
static uint64_t slot_tag(int thread) { return (uint64_t)thread << DST_SHIFT; }
static const uint64_t slot_ignore = ~(DECOY_BIT | DST_MASK);

/* Posts receive buffer `o` (tagged or not), with a randomly chosen call.
 * Retries while the endpoint says -FI_EAGAIN. */
static void post_slot(struct op *o, uint64_t *rng)
{
	uint8_t *buf = buf_of(o);
	struct iovec iov[4];
	ssize_t r;
	double deadline = now() + 30;
	int how = (int)(rnd(rng) % 3);
	do {
		if (o->kind == K_TRECV) {
			uint64_t tag = slot_tag(o->owner);
			if (how == 0) {
				r = fi_trecv(P.ep, buf, g_max, NULL, FI_ADDR_UNSPEC, tag, slot_ignore, &o->ctx);
			} else {
				size_t n = split_iov(iov, 1 + rnd(rng) % (P.iov_limit < 4 ? P.iov_limit : 4), buf, g_max, rng);
				if (how == 1) {
					r = fi_trecvv(P.ep, iov, NULL, n, FI_ADDR_UNSPEC, tag, slot_ignore, &o->ctx);
				} else {
					struct fi_msg_tagged m = {.msg_iov = iov, .iov_count = n, .addr = FI_ADDR_UNSPEC,
								  .tag = tag, .ignore = slot_ignore, .context = &o->ctx};
					r = fi_trecvmsg(P.ep, &m, FI_COMPLETION);
				}
			}
		} else {
			if (how == 0) {
				r = fi_recv(P.ep, buf, g_max, NULL, FI_ADDR_UNSPEC, &o->ctx);
			} else {
				size_t n = split_iov(iov, 1 + rnd(rng) % (P.iov_limit < 4 ? P.iov_limit : 4), buf, g_max, rng);
				if (how == 1) {
					r = fi_recvv(P.ep, iov, NULL, n, FI_ADDR_UNSPEC, &o->ctx);
				} else {
					struct fi_msg m = {.msg_iov = iov, .iov_count = n, .addr = FI_ADDR_UNSPEC,
							   .context = &o->ctx};
					r = fi_recvmsg(P.ep, &m, FI_COMPLETION);
				}
			}
		}
		if (r == -FI_EAGAIN) {
			atomic_fetch_add(&P.eagain, 1);
			struct fi_cq_tagged_entry c;
			(void)fi_cq_read(P.cq, &c, 0); /* progress only */
		}
	} while (r == -FI_EAGAIN && now() < deadline);
	if (r)
		failf("posting a %s receive: %zd (%s)", o->kind == K_TRECV ? "tagged" : "untagged", r,
		      fi_strerror((int)-r));
}

static void post_decoy(struct thr *t, struct op *o)
{
	uint64_t tag = DECOY_BIT | (uint64_t)t->id << 40 | (rnd(&t->rng) & 0xffffffffffULL);
	ssize_t r;
	double deadline = now() + 30;
	while ((r = fi_trecv(P.ep, buf_of(o), 64, NULL, FI_ADDR_UNSPEC, tag, 0, &o->ctx)) == -FI_EAGAIN &&
	       now() < deadline)
		atomic_fetch_add(&P.eagain, 1);
	if (r) {
		failf("posting a decoy receive: %zd (%s)", r, fi_strerror((int)-r));
		return;
	}
	atomic_store(&o->busy, 1);
	atomic_fetch_add(&P.decoy_posted, 1);
	r = fi_cancel(&P.ep->fid, &o->ctx);
	if (r)
		failf("fi_cancel of a posted decoy receive: %zd (%s)", r, fi_strerror((int)-r));
}

/* A receive completed with a message: checks everything about it. Returns
 * the sending peer, or -1 when the message does not even say who sent it. */
static int verify_message(struct op *o, const struct fi_cq_tagged_entry *c, fi_addr_t src)
{
	uint64_t id;
	int tagged = o->kind == K_TRECV;
	if (!(c->flags & FI_RECV) || !!(c->flags & FI_TAGGED) != tagged || !!(c->flags & FI_MSG) == tagged) {
		failf("receive completion flags 0x%" PRIx64 " on a %s buffer", c->flags, tagged ? "tagged" : "untagged");
		return -1;
	}
	if (tagged) {
		if ((c->tag & (DECOY_BIT | DST_MASK)) != slot_tag(o->owner)) {
			failf("tag 0x%" PRIx64 " matched a buffer posted for thread %d", c->tag, o->owner);
			return -1;
		}
		id = c->tag & ID_MASK;
		if ((c->flags & FI_REMOTE_CQ_DATA) && c->data != id) {
			failf("tagged message %" PRIx64 " carries data 0x%" PRIx64, id, c->data);
			return -1;
		}
	} else {
		if (!(c->flags & FI_REMOTE_CQ_DATA)) {
			failf("untagged message without remote CQ data (len %zu)", c->len);
			return -1;
		}
		id = c->data;
	}
	unsigned sp = id_proc(id), st = id_thread(id);
	uint64_t seq = id_seq(id);
	if (sp >= (unsigned)g_procs || st >= (unsigned)g_threads || seq >= P.seen_bits) {
		failf("message with an impossible identity 0x%" PRIx64 " (len %zu)", id, c->len);
		return -1;
	}
	size_t want = msg_len(id);
	if (c->len != want) {
		failf("message %u/%u/%" PRIu64 ": length %zu, sent %zu", sp, st, seq, c->len, want);
		return (int)sp;
	}
	if (src != FI_ADDR_NOTAVAIL && src != P.peer[sp]) {
		failf("message %u/%u/%" PRIu64 ": source fi_addr %" PRIu64 ", peer %u is %" PRIu64, sp, st, seq,
		      (uint64_t)src, sp, (uint64_t)P.peer[sp]);
		return (int)sp;
	}
	long bad = check(o->buf, c->len, id);
	if (bad >= 0) {
		failf("message %u/%u/%" PRIu64 " (%zu bytes, %s): byte %ld is 0x%02x, sent 0x%02x", sp, st, seq, c->len,
		      tagged ? "tagged" : "untagged", bad, o->buf[bad], pat(mix(id + 0x5bd1e995), (size_t)bad));
		return (int)sp;
	}
	uint64_t bit = 1ULL << (seq & 63);
	if (atomic_fetch_or(&P.seen[sp][st][seq >> 6], bit) & bit)
		failf("message %u/%u/%" PRIu64 " received twice", sp, st, seq);
	return (int)sp;
}

/* Every arrival counts (a bad one too, so that the counts still add up and
 * the run ends): the checks have already said what was wrong with it. */
static void check_message(struct op *o, const struct fi_cq_tagged_entry *c, fi_addr_t src)
{
	int sp = verify_message(o, c, src);
	if (sp >= 0)
		atomic_fetch_add(&P.recv_from[sp], 1);
	atomic_fetch_add(&P.bytes_recv, c->len);
	atomic_fetch_add(&P.received, 1);
	release_pages(o, c->len);
}

static void on_completion(const struct fi_cq_tagged_entry *c, fi_addr_t src, uint64_t *rng)
{
	struct op *o = c->op_context;
	if (!o) {
		failf("completion without context (flags 0x%" PRIx64 ")", c->flags);
		return;
	}
	switch (o->kind) {
	case K_SEND:
		if (!(c->flags & FI_SEND))
			failf("send completion flags 0x%" PRIx64, c->flags);
		release_pages(o, o->len);
		atomic_store(&o->busy, 0);
		break;
	case K_DECOY:
		failf("a decoy receive (tag nobody sends) completed with %zu bytes, tag 0x%" PRIx64, c->len, c->tag);
		atomic_store(&o->busy, 0);
		break;
	case K_TRECV:
	case K_RECV:
		check_message(o, c, src);
		post_slot(o, rng);
		break;
	}
}

static void on_error(const struct fi_cq_err_entry *e, uint64_t *rng)
{
	struct op *o = e->op_context;
	if (!o) {
		failf("error completion without context: %d (%s)", e->err, fi_strerror(e->err));
		return;
	}
	if (e->err == FI_ECANCELED && o->kind == K_DECOY) {
		atomic_fetch_add(&P.decoy_done, 1);
		atomic_store(&o->busy, 0);
		return;
	}
	if (e->err == FI_ECANCELED && (o->kind == K_TRECV || o->kind == K_RECV)) {
		/* Only after an fi_cancel that found it posted, once each. */
		if (atomic_fetch_sub(&o->cancels, 1) <= 0) {
			atomic_fetch_add(&o->cancels, 1);
			failf("a receive nobody cancelled completed with FI_ECANCELED");
		}
		atomic_fetch_add(&P.cancel_got, 1);
		post_slot(o, rng);
		return;
	}
	count_errno(e->err);
	failf("%s completed with error %d (%s), prov_errno %d, len %zu",
	      o->kind == K_SEND ? "a send" : "a receive", e->err, fi_strerror(e->err), e->prov_errno, e->len);
	if (o->kind == K_SEND)
		atomic_store(&o->busy, 0);
	else if (o->kind == K_TRECV || o->kind == K_RECV) {
		post_slot(o, rng);
	}
}

/* Reads and handles what the CQ holds (and so drives progress). */
static int poll_cq(uint64_t *rng)
{
	struct fi_cq_tagged_entry c[8];
	fi_addr_t src[8];
	ssize_t n = fi_cq_readfrom(P.cq, c, 8, src);
	if (n > 0) {
		for (ssize_t i = 0; i < n; i++)
			on_completion(&c[i], src[i], rng);
		return (int)n;
	}
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry e;
		memset(&e, 0, sizeof e);
		ssize_t r = fi_cq_readerr(P.cq, &e, 0);
		if (r == 1)
			on_error(&e, rng);
		else if (r != -FI_EAGAIN)
			failf("fi_cq_readerr: %zd (%s)", r, fi_strerror((int)-r));
		return 1;
	}
	if (n != -FI_EAGAIN)
		failf("fi_cq_readfrom: %zd (%s)", n, fi_strerror((int)-n));
	return 0;
}

/* ---- sends --------------------------------------------------------------- */
static void send_one(struct thr *t, struct op *o)
{
	unsigned dp = (unsigned)(rnd(&t->rng) % (uint64_t)g_procs);
	unsigned dt = (unsigned)(rnd(&t->rng) % (uint64_t)g_threads);
	uint64_t id = make_id((unsigned)P.me, (unsigned)t->id, t->seq);
	size_t len = msg_len(id);
	uint8_t *buf = buf_of(o);
	fill(buf, len, id);
	int planted = g_fault != F_NONE && t->seq % 97 == 5 && !(g_fault == F_DUP && t->dupped == t->seq + 1);
	if (planted && g_fault == F_CORRUPT)
		buf[len / 2] ^= 0x10;
	int tagged = rnd(&t->rng) & 1;
	uint64_t tag = (uint64_t)dt << DST_SHIFT | id;
	fi_addr_t to = P.peer[dp];
	int inj = len <= P.inject_size && (rnd(&t->rng) % 4 == 0);
	enum sop which;
	if (tagged)
		which = inj ? (rnd(&t->rng) & 1 ? S_TINJECT : S_TINJECTDATA) : (enum sop)(rnd(&t->rng) % 4);
	else
		which = inj ? S_INJECTDATA : (rnd(&t->rng) & 1 ? S_SENDDATA : S_SENDMSG);
	o->id = id;
	o->len = len;
	o->to = (int)dp;
	o->which = (int)which;
	int with_completion = !(which == S_TINJECT || which == S_TINJECTDATA || which == S_INJECTDATA);
	if (with_completion)
		atomic_store(&o->busy, 1);
	struct iovec iov[4];
	size_t n = 1 + rnd(&t->rng) % (P.iov_limit < 4 ? P.iov_limit : 4);
	ssize_t r;
	double deadline = now() + 30;
	for (;;) {
		if (planted && g_fault == F_LOSE) {
			r = 0; /* "sent" */
			atomic_store(&o->busy, 0);
			break;
		}
		switch (which) {
		case S_TSEND: r = fi_tsend(P.ep, buf, len, NULL, to, tag, &o->ctx); break;
		case S_TSENDV:
			split_iov(iov, n, buf, len, &t->rng);
			r = fi_tsendv(P.ep, iov, NULL, n, to, tag, &o->ctx);
			break;
		case S_TSENDDATA: r = fi_tsenddata(P.ep, buf, len, NULL, id, to, tag, &o->ctx); break;
		case S_TSENDMSG: {
			split_iov(iov, n, buf, len, &t->rng);
			struct fi_msg_tagged m = {.msg_iov = iov, .iov_count = n, .addr = to, .tag = tag,
						  .context = &o->ctx, .data = id};
			r = fi_tsendmsg(P.ep, &m, FI_COMPLETION | (rnd(&t->rng) & 1 ? FI_REMOTE_CQ_DATA : 0));
			break;
		}
		case S_TINJECT: r = fi_tinject(P.ep, buf, len, to, tag); break;
		case S_TINJECTDATA: r = fi_tinjectdata(P.ep, buf, len, id, to, tag); break;
		case S_SENDDATA: r = fi_senddata(P.ep, buf, len, NULL, id, to, &o->ctx); break;
		case S_SENDMSG: {
			split_iov(iov, n, buf, len, &t->rng);
			struct fi_msg m = {.msg_iov = iov, .iov_count = n, .addr = to, .context = &o->ctx, .data = id};
			r = fi_sendmsg(P.ep, &m, FI_COMPLETION | FI_REMOTE_CQ_DATA);
			break;
		}
		case S_INJECTDATA: r = fi_injectdata(P.ep, buf, len, id, to); break;
		default: r = -FI_EINVAL;
		}
		if (r != -FI_EAGAIN || now() > deadline)
			break;
		atomic_fetch_add(&P.eagain, 1);
		poll_cq(&t->rng);
	}
	if (r) {
		count_errno((int)-r);
		failf("%s of %zu bytes to peer %u: %zd (%s)", sop_name[which], len, dp, r, fi_strerror((int)-r));
		if (with_completion)
			atomic_store(&o->busy, 0);
		return;
	}
	if (!with_completion)
		release_pages(o, len);
	if (planted && g_fault == F_DUP)
		t->dupped = t->seq + 1; /* the next message reuses this identity */
	else
		t->seq++;
	atomic_fetch_add(&P.sops[which], 1);
	atomic_fetch_add(&P.sent_to[dp], 1);
	atomic_fetch_add(&P.bytes_sent, len);
}

static void *worker(void *arg)
{
	struct thr *t = arg;
	double send_until = now() + g_seconds;
	int done = 0;
	while (!atomic_load(&P.stop)) {
		if (!done) {
			if (t->seq < g_ops && now() < send_until) {
				struct op *o = NULL;
				for (int i = 0; i < WINDOW && !o; i++)
					if (!atomic_load(&t->send[i].busy))
						o = &t->send[i];
				if (o) {
					send_one(t, o);
					/* Now and then: a decoy receive cancelled at
					 * once, or one of this thread's live buffers
					 * cancelled (it may be matching a message right
					 * now: then fi_cancel finds nothing). */
					uint64_t r = rnd(&t->rng) % 32;
					if (r == 0) {
						for (int i = 0; i < DECOYS; i++)
							if (!atomic_load(&t->decoy[i].busy)) {
								post_decoy(t, &t->decoy[i]);
								break;
							}
					} else if (r == 1) {
						struct op *s = &t->tslot[rnd(&t->rng) % TSLOTS];
						atomic_fetch_add(&s->cancels, 1);
						ssize_t c = fi_cancel(&P.ep->fid, &s->ctx);
						if (c == 0) {
							atomic_fetch_add(&P.cancel_asked, 1);
						} else {
							atomic_fetch_sub(&s->cancels, 1);
							if (c == -FI_ENOENT)
								atomic_fetch_add(&P.cancel_late, 1);
							else
								failf("fi_cancel of a posted receive: %zd (%s)", c,
								      fi_strerror((int)-c));
						}
					}
				}
			} else {
				int busy = 0;
				for (int i = 0; i < WINDOW; i++)
					busy |= atomic_load(&t->send[i].busy);
				for (int i = 0; i < DECOYS; i++)
					busy |= atomic_load(&t->decoy[i].busy);
				if (!busy) {
					done = 1;
					atomic_fetch_add(&P.phase1_done, 1);
				}
			}
		}
		if (!poll_cq(&t->rng) && done)
			sched_yield();
	}
	return NULL;
}

/* ---- plumbing between the parent and a peer ---------------------------- */
static int xwrite(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w, n -= (size_t)w;
	}
	return 0;
}

/* Reads exactly n bytes, waiting at most until `deadline`. */
static int xread(int fd, void *p, size_t n, double deadline)
{
	char *c = p;
	while (n) {
		int ms = (int)((deadline - now()) * 1000);
		if (ms <= 0)
			return -1;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int pr = poll(&pfd, 1, ms > 1000 ? 1000 : ms);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue;
		ssize_t r = read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r, n -= (size_t)r;
	}
	return 0;
}

struct result {
	uint64_t recv_from[MAX_PROCS];
	uint64_t sops[S_NOPS], bytes_sent, bytes_recv, received;
	uint64_t cancel_asked, cancel_got, cancel_late, decoy_posted, decoy_done;
	uint64_t eagain, failures;
};

static int open_endpoint(void)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;
	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup("rustfab");
	hints->domain_attr->name = strdup(g_transport);
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->av_type = FI_AV_MAP;
	if (g_auto_progress) {
		hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
		hints->domain_attr->control_progress = FI_PROGRESS_AUTO;
	}
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_SOURCE;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &P.info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	P.inject_size = P.info->tx_attr->inject_size;
	P.iov_limit = P.info->tx_attr->iov_limit < P.info->rx_attr->iov_limit ? P.info->tx_attr->iov_limit
										    : P.info->rx_attr->iov_limit;
	if (P.iov_limit < 1)
		P.iov_limit = 1;
	if ((ret = fi_fabric(P.info->fabric_attr, &P.fabric, NULL)) ||
	    (ret = fi_domain(P.fabric, P.info, &P.domain, NULL)))
		return ret;
	struct fi_av_attr av_attr = {.type = FI_AV_MAP};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 16384};
	if ((ret = fi_av_open(P.domain, &av_attr, &P.av, NULL)) ||
	    (ret = fi_cq_open(P.domain, &cq_attr, &P.cq, NULL)) ||
	    (ret = fi_endpoint(P.domain, P.info, &P.ep, NULL)) || (ret = fi_ep_bind(P.ep, &P.av->fid, 0)) ||
	    (ret = fi_ep_bind(P.ep, &P.cq->fid, FI_TRANSMIT | FI_RECV)) || (ret = fi_enable(P.ep)))
		return ret;
	return 0;
}

static void close_endpoint(void)
{
	if (P.ep)
		fi_close(&P.ep->fid);
	if (P.cq)
		fi_close(&P.cq->fid);
	if (P.av)
		fi_close(&P.av->fid);
	if (P.domain)
		fi_close(&P.domain->fid);
	if (P.fabric)
		fi_close(&P.fabric->fid);
	if (P.info)
		fi_freeinfo(P.info);
}

/* One peer: rfd from the parent, wfd to it. Exit status 0 if it ran (the
 * parent judges the counts), 2 if it could not. */
static int peer_main(int me, int rfd, int wfd)
{
	double deadline = now() + g_timeout;
	P.me = me;
	int ret = open_endpoint();
	if (ret) {
		fprintf(stderr, "rf_stress[peer %d]: opening the endpoint: %d (%s)\n", me, ret, fi_strerror(-ret));
		return 2;
	}
	char addr[256];
	size_t alen = sizeof addr;
	if ((ret = fi_getname(&P.ep->fid, addr, &alen))) {
		fprintf(stderr, "rf_stress[peer %d]: fi_getname: %d\n", me, ret);
		return 2;
	}
	if (xwrite(wfd, &alen, sizeof alen) || xwrite(wfd, addr, alen))
		return 2;
	for (int p = 0; p < g_procs; p++) {
		size_t l;
		if (xread(rfd, &l, sizeof l, deadline) || l > sizeof addr || xread(rfd, addr, l, deadline))
			return 2;
		if (fi_av_insert(P.av, addr, 1, &P.peer[p], 0, NULL) != 1) {
			fprintf(stderr, "rf_stress[peer %d]: fi_av_insert of peer %d failed\n", me, p);
			return 2;
		}
	}
	P.seen_bits = g_ops;
	for (int p = 0; p < g_procs; p++)
		for (int t = 0; t < g_threads; t++) {
			P.seen[p][t] = calloc((g_ops + 63) / 64, sizeof(uint64_t));
			if (!P.seen[p][t])
				return 2;
		}
	/* Receive buffers: each thread's tagged ones, the peer's untagged. */
	uint64_t rng = mix(g_seed ^ (uint64_t)me << 32) | 1;
	for (int t = 0; t < g_threads; t++) {
		struct thr *th = &P.thr[t];
		th->id = t;
		th->rng = mix(g_seed ^ (uint64_t)me << 32 ^ (uint64_t)t << 16) | 1;
		for (int i = 0; i < WINDOW; i++)
			th->send[i] = (struct op){.kind = K_SEND, .owner = t};
		for (int i = 0; i < DECOYS; i++)
			th->decoy[i] = (struct op){.kind = K_DECOY, .owner = t};
		for (int i = 0; i < TSLOTS; i++) {
			th->tslot[i] = (struct op){.kind = K_TRECV, .owner = t};
			post_slot(&th->tslot[i], &rng);
		}
	}
	for (int i = 0; i < MSLOTS; i++) {
		P.mslot[i] = (struct op){.kind = K_RECV, .owner = -1};
		post_slot(&P.mslot[i], &rng);
	}
	/* Everyone has posted before anyone sends: the parent's "go". */
	char go;
	if (xwrite(wfd, "r", 1) || xread(rfd, &go, 1, deadline))
		return 2;
	double t0 = now();
	for (int t = 0; t < g_threads; t++)
		pthread_create(&P.thr[t].th, NULL, worker, &P.thr[t]);
	/* Phase 1: every thread has sent its messages and seen them complete. */
	while (atomic_load(&P.phase1_done) < g_threads && now() < deadline)
		usleep(2000);
	if (atomic_load(&P.phase1_done) < g_threads)
		report_pending();
	report_errnos();
	uint64_t sent_to[MAX_PROCS] = {0};
	for (int p = 0; p < g_procs; p++)
		sent_to[p] = atomic_load(&P.sent_to[p]);
	double t1 = now();
	if (xwrite(wfd, sent_to, sizeof sent_to))
		return 2;
	/* Phase 2: receive until everything sent to us has arrived. */
	uint64_t expected = 0;
	if (xread(rfd, &expected, sizeof expected, deadline))
		return 2;
	/* Every send has completed everywhere: what is still coming is
	 * already on its way, and -W bounds the wait for it. */
	double wait_until = now() + g_grace < deadline ? now() + g_grace : deadline;
	while ((atomic_load(&P.received) < expected || atomic_load(&P.decoy_done) < atomic_load(&P.decoy_posted) ||
		atomic_load(&P.cancel_got) < atomic_load(&P.cancel_asked)) &&
	       now() < wait_until)
		usleep(2000);
	if (atomic_load(&P.received) != expected)
		failf("received %" PRIu64 " messages, %" PRIu64 " were sent here", atomic_load(&P.received), expected);
	if (atomic_load(&P.decoy_done) != atomic_load(&P.decoy_posted))
		failf("%" PRIu64 " decoy receives cancelled, %" PRIu64 " completed FI_ECANCELED",
		      atomic_load(&P.decoy_posted), atomic_load(&P.decoy_done));
	if (atomic_load(&P.cancel_got) != atomic_load(&P.cancel_asked))
		failf("fi_cancel found %" PRIu64 " posted receives, %" PRIu64 " completed FI_ECANCELED",
		      atomic_load(&P.cancel_asked), atomic_load(&P.cancel_got));
	struct result res;
	memset(&res, 0, sizeof res);
	for (int p = 0; p < g_procs; p++)
		res.recv_from[p] = atomic_load(&P.recv_from[p]);
	for (int i = 0; i < S_NOPS; i++)
		res.sops[i] = atomic_load(&P.sops[i]);
	res.bytes_sent = atomic_load(&P.bytes_sent);
	res.bytes_recv = atomic_load(&P.bytes_recv);
	res.received = atomic_load(&P.received);
	res.cancel_asked = atomic_load(&P.cancel_asked);
	res.cancel_got = atomic_load(&P.cancel_got);
	res.cancel_late = atomic_load(&P.cancel_late);
	res.decoy_posted = atomic_load(&P.decoy_posted);
	res.decoy_done = atomic_load(&P.decoy_done);
	res.eagain = atomic_load(&P.eagain);
	res.failures = atomic_load(&P.failures);
	if (g_verbose)
		fprintf(stderr, "rf_stress[peer %d]: sent for %.1f s, all received %.1f s later\n", me, t1 - t0,
			now() - t1);
	if (xwrite(wfd, &res, sizeof res))
		return 2;
	/* Keep progressing (the threads poll) until every peer is done, then
	 * close. */
	if (xread(rfd, &go, 1, deadline))
		return 2;
	atomic_store(&P.stop, 1);
	for (int t = 0; t < g_threads; t++)
		pthread_join(P.thr[t].th, NULL);
	close_endpoint();
	return 0;
}

/* ---- the parent ---------------------------------------------------------- */
static void usage(void)
{
	fprintf(stderr, "usage: rf_stress [-t shm|tcp|auto] [-p procs] [-n threads] [-o ops] [-d seconds]\n"
			"                 [-m max_size] [-s seed] [-T timeout] [-W grace] [-A] [-v]\n"
			"                 [-X corrupt|lose|dup]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "t:p:n:o:d:m:s:T:W:AvX:")) != -1) {
		switch (c) {
		case 't': g_transport = optarg; break;
		case 'p': g_procs = atoi(optarg); break;
		case 'n': g_threads = atoi(optarg); break;
		case 'o': g_ops = strtoull(optarg, NULL, 0); break;
		case 'd': g_seconds = atof(optarg); break;
		case 'm': g_max = strtoull(optarg, NULL, 0); break;
		case 's': g_seed = strtoull(optarg, NULL, 0); break;
		case 'T': g_timeout = atof(optarg); break;
		case 'W': g_grace = atof(optarg); break;
		case 'A': g_auto_progress = 1; break;
		case 'v': g_verbose = 1; break;
		case 'X':
			g_fault = !strcmp(optarg, "corrupt") ? F_CORRUPT
				  : !strcmp(optarg, "lose")  ? F_LOSE
				  : !strcmp(optarg, "dup")   ? F_DUP
							     : (usage(), F_NONE);
			break;
		default: usage();
		}
	}
	if (g_procs < 1 || g_procs > MAX_PROCS || g_threads < 1 || g_threads > MAX_THREADS || g_ops < 1 ||
	    g_max < 1 || g_ops >= (1ULL << 40))
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* A peer that died or gave up closes its pipes: writing to them must
	 * fail (EPIPE, counted as that peer's failure), not kill the parent. */
	signal(SIGPIPE, SIG_IGN);
	double t0 = now(), deadline = t0 + g_timeout + 10;
	int to_peer[MAX_PROCS], from_peer[MAX_PROCS];
	pid_t pid[MAX_PROCS];
	pid_t parent = getpid();
	for (int p = 0; p < g_procs; p++) {
		int a[2], b[2];
		if (pipe(a) || pipe(b)) {
			perror("pipe");
			return 2;
		}
		fflush(NULL);
		pid[p] = fork();
		if (pid[p] < 0) {
			perror("fork");
			return 2;
		}
		if (pid[p] == 0) {
			/* The peer dies with the parent (a timeout kills only it). */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(2);
			close(a[1]);
			close(b[0]);
			for (int q = 0; q < p; q++) {
				close(to_peer[q]);
				close(from_peer[q]);
			}
			_exit(peer_main(p, a[0], b[1]));
		}
		close(a[0]);
		close(b[1]);
		to_peer[p] = a[1];
		from_peer[p] = b[0];
	}
	int broken = 0;
	/* Addresses: gather, then give every peer all of them. */
	static char addrs[MAX_PROCS][256];
	size_t alen[MAX_PROCS];
	for (int p = 0; p < g_procs && !broken; p++)
		if (xread(from_peer[p], &alen[p], sizeof alen[p], deadline) || alen[p] > 256 ||
		    xread(from_peer[p], addrs[p], alen[p], deadline)) {
			fprintf(stderr, "rf_stress: peer %d did not start\n", p);
			broken = 1;
		}
	for (int p = 0; p < g_procs && !broken; p++)
		for (int q = 0; q < g_procs; q++)
			if (xwrite(to_peer[p], &alen[q], sizeof alen[q]) || xwrite(to_peer[p], addrs[q], alen[q]))
				broken = 1;
	char r;
	for (int p = 0; p < g_procs && !broken; p++)
		if (xread(from_peer[p], &r, 1, deadline))
			broken = 1;
	for (int p = 0; p < g_procs && !broken; p++)
		if (xwrite(to_peer[p], "g", 1))
			broken = 1;
	/* Phase 1 ends: what each peer sent to each. */
	static uint64_t sent[MAX_PROCS][MAX_PROCS];
	for (int p = 0; p < g_procs && !broken; p++)
		if (xread(from_peer[p], sent[p], sizeof sent[p], deadline)) {
			fprintf(stderr, "rf_stress: peer %d did not finish sending (and seeing its sends complete) in time\n", p);
			broken = 1;
		}
	for (int q = 0; q < g_procs && !broken; q++) {
		uint64_t e = 0;
		for (int p = 0; p < g_procs; p++)
			e += sent[p][q];
		if (xwrite(to_peer[q], &e, sizeof e))
			broken = 1;
	}
	static struct result res[MAX_PROCS];
	for (int p = 0; p < g_procs && !broken; p++)
		if (xread(from_peer[p], &res[p], sizeof res[p], deadline)) {
			fprintf(stderr, "rf_stress: peer %d did not report\n", p);
			broken = 1;
		}
	for (int p = 0; p < g_procs && !broken; p++)
		if (xwrite(to_peer[p], "c", 1))
			broken = 1;
	/* Reap (kill what is left if something broke or hangs). */
	int exited_badly = 0;
	for (int p = 0; p < g_procs; p++) {
		int st = 0;
		if (broken)
			kill(pid[p], SIGKILL);
		for (;;) {
			pid_t w = waitpid(pid[p], &st, WNOHANG);
			if (w == pid[p])
				break;
			if (now() > deadline) {
				kill(pid[p], SIGKILL);
				waitpid(pid[p], &st, 0);
				fprintf(stderr, "rf_stress: peer %d did not exit\n", p);
				break;
			}
			usleep(10000);
		}
		/* Whatever else happened: a peer that a signal of its own
		 * killed (SIGBUS, SIGSEGV; not our SIGKILL) is named. */
		if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
			fprintf(stderr, "rf_stress: peer %d killed by signal %d (%s)\n", p, WTERMSIG(st),
				strsignal(WTERMSIG(st)));
		if (!broken && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			fprintf(stderr, "rf_stress: peer %d ended with status 0x%x\n", p, st);
			exited_badly++;
		}
	}
	if (broken) {
		printf("rf_stress %s: FAILED: a peer broke off or hung (see above)\n", g_transport);
		return 1;
	}
	/* Judge: per pair, received == sent; and nothing failed anywhere. */
	uint64_t mism = 0, failures = 0, total = 0, bytes = 0, cancel_asked = 0, cancel_got = 0, cancel_late = 0,
		 decoys = 0, eagain = 0, sops[S_NOPS] = {0};
	for (int q = 0; q < g_procs; q++) {
		for (int p = 0; p < g_procs; p++)
			if (res[q].recv_from[p] != sent[p][q]) {
				fprintf(stderr, "rf_stress: peer %d received %" PRIu64 " messages from peer %d, which sent %" PRIu64 "\n",
					q, res[q].recv_from[p], p, sent[p][q]);
				mism++;
			}
		failures += res[q].failures;
		total += res[q].received;
		bytes += res[q].bytes_recv;
		cancel_asked += res[q].cancel_asked;
		cancel_got += res[q].cancel_got;
		cancel_late += res[q].cancel_late;
		decoys += res[q].decoy_done;
		eagain += res[q].eagain;
		for (int i = 0; i < S_NOPS; i++)
			sops[i] += res[q].sops[i];
		if (res[q].decoy_done != res[q].decoy_posted || res[q].cancel_got != res[q].cancel_asked)
			mism++;
	}
	double dt = now() - t0;
	printf("rf_stress %s: %d peers x %d threads, %" PRIu64 " messages (%.1f MB) received and checked in %.1f s\n",
	       g_transport, g_procs, g_threads, total, bytes / 1e6, dt);
	printf("  sends:");
	for (int i = 0; i < S_NOPS; i++)
		printf(" %s %" PRIu64, sop_name[i], sops[i]);
	printf("\n  cancels: %" PRIu64 " decoy receives cancelled; live receives: %" PRIu64 " cancelled (%" PRIu64
	       " FI_ECANCELED), %" PRIu64 " already matched (-FI_ENOENT); %" PRIu64 " -FI_EAGAIN retries\n",
	       decoys, cancel_asked, cancel_got, cancel_late, eagain);
	if (failures || mism || exited_badly) {
		printf("rf_stress %s: FAILED: %" PRIu64 " bad completions, %" PRIu64 " count mismatches, %d peers exited badly\n",
		       g_transport, failures, mism, exited_badly);
		return 1;
	}
	printf("rf_stress %s: ok (0 mismatches)\n", g_transport);
	return 0;
}
