/*
 * rf_soak: the processes of make soak (c-tests/soak/run.sh), over the
 * rustfab transport RF_TRANSPORT names (shm, tcp, auto).
 *
 *   rf_soak server <addr file>
 *   rf_soak client <addr file> <index> <generation> <mode> <seconds> [-X corrupt]
 *
 * The server opens one RDM endpoint (messages, tagged, RMA, atomics),
 * registers a region of SLOTS x SLOT_BYTES bytes and SLOTS counters for
 * remote access, writes its address to the file and serves until SIGTERM:
 * every message it receives is checked (header, length, every payload byte)
 * and, unless it is a flood message, echoed back to the sender (whose
 * address the message carries) with the same tag. Echoes to a client that
 * was killed end with error completions, which cost only that client. A
 * corrupt message ends the server with status 1 ("CORRUPT"); SIGTERM ends it
 * with status 0 and its totals.
 *
 * A client talks to the server for <seconds>, then exits 0:
 *   normal  - random operations, each checked: an untagged or tagged
 *             message of 96 B .. 256 KiB echoed and compared; an RMA write
 *             of up to 64 KiB into its slot then a read back, compared; a
 *             fetching atomic add on its counter, the fetched value compared
 *             with the running total;
 *   witness - the same, and no operation may take longer than 10 s;
 *   slow    - four 1 MiB tagged echoes posted at once, then 2 s without
 *             touching its CQ (the server's answers pile up), then read;
 *   flood   - bursts of small injected messages the server does not echo,
 *             one echo after each burst.
 * Slot <index>*8 + <generation>%8 is the client's (region and counter): a
 * restarted client (run.sh kills and restarts them) never shares a slot
 * with its killed predecessor's last operations. Any failure: status 1 and
 * a line saying what. -X corrupt flips one payload byte of some messages
 * after they are filled (the server must catch it: run.sh's self-check).
 */
#define _GNU_SOURCE
#include "../rdm_common.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <fcntl.h>
#include <signal.h>

#define MAGIC 0x50ac50acu
#define SLOTS 64
#define SLOT_BYTES (64u << 10)
#define KEY_REGION 0x50ac01
#define KEY_COUNTERS 0x50ac02
#define MAX_MSG (1u << 20)
#define RECVS 16        /* posted receives of each kind at the server */
#define MAX_PEERS 256   /* client addresses the server keeps */
#define OP_TIMEOUT 10.0 /* seconds for any one operation */

enum kind { K_ECHO = 1, K_TECHO = 2, K_FLOOD = 3 };

/* The first HDR bytes of every message; the rest is fill(seed). */
struct hdr {
	uint32_t magic, len;
	uint32_t kind, pid;
	uint64_t seq;
	uint32_t addrlen, pad;
	char addr[64];
};
#define HDR ((uint32_t)sizeof(struct hdr))

static unsigned seed_of(uint32_t pid, uint64_t seq) { return pid * 1000003u + (unsigned)seq; }

static void die(const char *what, long v)
{
	fprintf(stderr, "rf_soak[%d]: %s (%ld)\n", getpid(), what, v);
	exit(1);
}

static const struct end_opts *opts(uint64_t tx_flags)
{
	static struct end_opts o;
	memset(&o, 0, sizeof(o));
	o.caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
	o.tx_op_flags = tx_flags;
	return &o;
}

/* ------------------------------------------------------------------ server */

struct rbuf {
	int tagged;
	char *buf;
};

struct echo {
	struct echo *next;
	int peer;
	size_t len;
	uint64_t tag;
	int tagged;
	char buf[];
};

struct peer {
	char addr[64];
	uint32_t addrlen;
	fi_addr_t fa;
	int used, dead, outstanding;
	uint64_t stamp;
};

static volatile sig_atomic_t stop;
static void on_term(int s) { (void)s; stop = 1; }

static struct end S;
static struct peer peers[MAX_PEERS];
static uint64_t stamp, served, echoed, echo_errors, evicted;

static int peer_of(const struct hdr *h)
{
	int free_i = -1, old = -1;
	if (h->addrlen == 0 || h->addrlen > sizeof(h->addr))
		die("bad address length", h->addrlen);
	for (int i = 0; i < MAX_PEERS; i++) {
		struct peer *p = &peers[i];
		if (p->used && !p->dead && p->addrlen == h->addrlen && !memcmp(p->addr, h->addr, h->addrlen)) {
			p->stamp = ++stamp;
			return i;
		}
		if (!p->used && free_i < 0)
			free_i = i;
		if (p->used && p->outstanding == 0 && (old < 0 || p->stamp < peers[old].stamp))
			old = i;
	}
	if (free_i < 0) {
		if (old < 0)
			die("no peer entry free", MAX_PEERS);
		if (fi_av_remove(S.av, &peers[old].fa, 1, 0))
			die("fi_av_remove", 0);
		peers[old].used = 0;
		evicted++;
		free_i = old;
	}
	struct peer *p = &peers[free_i];
	memset(p, 0, sizeof(*p));
	memcpy(p->addr, h->addr, h->addrlen);
	p->addrlen = h->addrlen;
	if (fi_av_insert(S.av, p->addr, 1, &p->fa, 0, NULL) != 1)
		die("fi_av_insert of a client", 0);
	p->used = 1;
	p->stamp = ++stamp;
	return free_i;
}

static void post_recv(struct rbuf *r)
{
	/* Never -FI_EAGAIN: exactly as many are posted as were consumed. */
	ssize_t ret = r->tagged ? fi_trecv(S.ep, r->buf, MAX_MSG, NULL, FI_ADDR_UNSPEC, 0, ~0ULL, r)
				: fi_recv(S.ep, r->buf, MAX_MSG, NULL, FI_ADDR_UNSPEC, r);
	if (ret)
		die("posting a receive", (long)ret);
}

static struct echo *pending, **pending_tail = &pending;

static int try_echo(struct echo *e)
{
	struct peer *p = &peers[e->peer];
	ssize_t ret = e->tagged ? fi_tsend(S.ep, e->buf, e->len, NULL, p->fa, e->tag, e)
				: fi_send(S.ep, e->buf, e->len, NULL, p->fa, e);
	if (ret == -FI_EAGAIN)
		return 0;
	if (ret) {
		/* Refused at post (the peer is known dead): it costs only it. */
		echo_errors++;
		p->outstanding--;
		p->dead = 1;
		free(e);
		return 1;
	}
	return 1;
}

static void check_msg(const char *buf, size_t got, int tagged, uint64_t tag)
{
	const struct hdr *h = (const void *)buf;
	if (got < HDR || h->magic != MAGIC || h->len != got || (tagged && tag != h->seq) ||
	    (h->kind != K_ECHO && h->kind != K_TECHO && h->kind != K_FLOOD) || !check_fill(buf + HDR, got - HDR, seed_of(h->pid, h->seq))) {
		fprintf(stderr, "rf_soak server: CORRUPT message: %zu bytes, magic %#x, len %u, kind %u, from pid %u seq %llu\n",
			got, h->magic, h->len, h->kind, h->pid, (unsigned long long)h->seq);
		exit(1);
	}
}

static int server(const char *file)
{
	signal(SIGTERM, on_term);
	signal(SIGPIPE, SIG_IGN);
	int ret = end_open(&S, opts(0));
	if (ret)
		die("server end_open", ret);
	size_t rlen = SLOTS * (size_t)SLOT_BYTES;
	char *region = calloc(1, rlen);
	uint64_t *counters = calloc(SLOTS, sizeof(uint64_t));
	struct fid_mr *mr1, *mr2;
	if (!region || !counters)
		die("calloc", 0);
	if ((ret = fi_mr_reg(S.domain, region, rlen, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_REGION, 0, &mr1, NULL)) ||
	    (ret = fi_mr_reg(S.domain, counters, SLOTS * sizeof(uint64_t), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_COUNTERS, 0,
			     &mr2, NULL)))
		die("fi_mr_reg", ret);
	struct rbuf rb[2 * RECVS];
	for (int i = 0; i < 2 * RECVS; i++) {
		rb[i].tagged = i >= RECVS;
		if (!(rb[i].buf = malloc(MAX_MSG)))
			die("malloc", 0);
		/* Touched now: the RSS run.sh calls warm includes them. */
		memset(rb[i].buf, 0, MAX_MSG);
		post_recv(&rb[i]);
	}
	/* The address, as hex, written whole then renamed into place. */
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	FILE *f = fopen(tmp, "w");
	if (!f)
		die("the address file", errno);
	for (size_t i = 0; i < S.addrlen; i++)
		fprintf(f, "%02x", (unsigned char)S.addr[i]);
	fprintf(f, "\n");
	fclose(f);
	if (rename(tmp, file))
		die("rename", errno);

	/* SOAK_PLANT=fdleak: a descriptor leaked every second (run.sh's
	 * self-check: the descriptor bound must catch it). */
	int leak = getenv("SOAK_PLANT") && !strcmp(getenv("SOAK_PLANT"), "fdleak");
	double next_leak = now_sec() + 1;
	while (!stop) {
		struct fi_cq_tagged_entry c[16];
		if (leak && now_sec() > next_leak) {
			next_leak += 1;
			if (open("/dev/null", O_RDONLY) < 0)
				die("open", errno);
		}
		ssize_t n = fi_cq_read(S.cq, c, 16);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			if (fi_cq_readerr(S.cq, &err, 0) != 1)
				continue;
			struct rbuf *r = err.op_context;
			if (r >= rb && r < rb + 2 * RECVS) {
				/* A receive ended in error (a sender died mid-message): repost. */
				post_recv(r);
				continue;
			}
			struct echo *e = err.op_context;
			echo_errors++;
			peers[e->peer].outstanding--;
			peers[e->peer].dead = 1;
			free(e);
			continue;
		}
		if (n < 0 && n != -FI_EAGAIN)
			die("fi_cq_read", (long)n);
		for (ssize_t i = 0; i < n; i++) {
			if (c[i].flags & FI_SEND) {
				struct echo *e = c[i].op_context;
				peers[e->peer].outstanding--;
				echoed++;
				free(e);
				continue;
			}
			struct rbuf *r = c[i].op_context;
			check_msg(r->buf, c[i].len, r->tagged, c[i].tag);
			served++;
			const struct hdr *h = (const void *)r->buf;
			if (h->kind != K_FLOOD) {
				struct echo *e = malloc(sizeof(*e) + c[i].len);
				if (!e)
					die("malloc", 0);
				e->next = NULL;
				e->peer = peer_of(h);
				e->len = c[i].len;
				e->tag = h->seq;
				e->tagged = r->tagged;
				memcpy(e->buf, r->buf, c[i].len);
				peers[e->peer].outstanding++;
				*pending_tail = e;
				pending_tail = &e->next;
			}
			post_recv(r);
		}
		while (pending) {
			struct echo *e = pending, *next = e->next; /* try_echo may free e */
			if (!try_echo(e))
				break;
			pending = next;
			if (!pending)
				pending_tail = &pending;
		}
	}
	printf("rf_soak server: %llu messages checked, %llu echoed, %llu echoes failed (killed clients), %llu peers evicted\n",
	       (unsigned long long)served, (unsigned long long)echoed, (unsigned long long)echo_errors,
	       (unsigned long long)evicted);
	fflush(stdout);
	end_close(&S);
	return 0;
}

/* ------------------------------------------------------------------ client */

static struct end C;
static int corrupt;
static uint64_t seq;
static uint32_t me;

static uint64_t rnd(void)
{
	static uint64_t x;
	if (!x)
		x = ((uint64_t)getpid() << 32 ^ (uint64_t)(now_sec() * 1e9)) | 1;
	x ^= x << 13, x ^= x >> 7, x ^= x << 17;
	return x;
}

/* Waits for `n` completions (any order) of the contexts in ctx[]. */
static void wait_all(void **ctx, int n, const char *what)
{
	int left = n;
	double d = now_sec() + OP_TIMEOUT;
	while (left > 0) {
		struct fi_cq_tagged_entry c;
		ssize_t r;
		/* Completions a retried post read meanwhile (poke1) first. */
		if (C.nstash > 0) {
			c = C.stash[--C.nstash];
			r = 1;
		} else {
			r = fi_cq_read(C.cq, &c, 1);
		}
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(C.cq, &err, 0);
			fprintf(stderr, "rf_soak client %d: %s: error completion %d (%s)\n", getpid(), what, err.err,
				fi_strerror(err.err));
			exit(1);
		}
		if (r == 1) {
			for (int i = 0; i < n; i++)
				if (ctx[i] == c.op_context) {
					ctx[i] = NULL;
					left--;
				}
			continue;
		}
		if (r != -FI_EAGAIN)
			die(what, (long)r);
		if (now_sec() > d) {
			fprintf(stderr, "rf_soak client %d: HANG: %s took more than %.0f s\n", getpid(), what, OP_TIMEOUT);
			exit(1);
		}
	}
}

static size_t make_msg(char *buf, size_t len, int kind)
{
	struct hdr *h = (void *)buf;
	memset(h, 0, sizeof(*h));
	h->magic = MAGIC;
	h->len = (uint32_t)len;
	h->kind = (uint32_t)kind;
	h->pid = me;
	h->seq = ++seq;
	h->addrlen = (uint32_t)C.addrlen;
	memcpy(h->addr, C.addr, C.addrlen);
	fill(buf + HDR, len - HDR, seed_of(me, h->seq));
	if (corrupt && h->seq % 16 == 0)
		buf[HDR + (len - HDR) / 2] ^= 0x40;
	return len;
}

#define RETRY(expr, what)                                                  \
	do {                                                               \
		ssize_t _r;                                                \
		double _d = now_sec() + OP_TIMEOUT;                        \
		while ((_r = (expr)) == -FI_EAGAIN) {                      \
			poke1(&C);                                         \
			if (now_sec() > _d)                                \
				die("HANG: no room to post " what, 0);     \
		}                                                          \
		if (_r)                                                    \
			die("posting " what, (long)_r);                    \
	} while (0)

static size_t msg_len(void)
{
	uint64_t r = rnd() % 100;
	size_t hi = r < 60 ? 256 : r < 90 ? 16384 : 256 << 10;
	return HDR + (size_t)(rnd() % (hi - HDR + 1));
}

static void echo(fi_addr_t srv, int tagged, size_t len, char *out, char *in)
{
	make_msg(out, len, tagged ? K_TECHO : K_ECHO);
	uint64_t tag = ((struct hdr *)out)->seq;
	void *ctx[2] = {out, in};
	if (tagged)
		RETRY(fi_trecv(C.ep, in, MAX_MSG, NULL, srv, tag, 0, in), "fi_trecv");
	else
		RETRY(fi_recv(C.ep, in, MAX_MSG, NULL, srv, in), "fi_recv");
	if (tagged)
		RETRY(fi_tsend(C.ep, out, len, NULL, srv, tag, out), "fi_tsend");
	else
		RETRY(fi_send(C.ep, out, len, NULL, srv, out), "fi_send");
	wait_all(ctx, 2, tagged ? "tagged echo" : "echo");
	if (memcmp(out, in, len)) {
		fprintf(stderr, "rf_soak client %d: CORRUPT echo of seq %llu (%zu bytes)\n", getpid(),
			(unsigned long long)tag, len);
		exit(1);
	}
}

static int client(const char *file, int index, int gen, const char *mode, double secs)
{
	signal(SIGPIPE, SIG_IGN);
	me = (uint32_t)getpid();
	int ret = end_open(&C, opts(FI_DELIVERY_COMPLETE));
	if (ret)
		die("client end_open", ret);
	char hex[512] = {0}, addr[256];
	FILE *f = fopen(file, "r");
	if (!f || !fgets(hex, sizeof(hex), f))
		die("reading the server's address", errno);
	fclose(f);
	size_t alen = strlen(hex) / 2;
	for (size_t i = 0; i < alen; i++)
		sscanf(hex + 2 * i, "%2hhx", (unsigned char *)&addr[i]);
	fi_addr_t srv;
	if (fi_av_insert(C.av, addr, 1, &srv, 0, NULL) != 1)
		die("fi_av_insert of the server", 0);
	int slot = (index * 8 + gen % 8) % SLOTS;
	char *out = malloc(MAX_MSG), *in = malloc(MAX_MSG), *rma = malloc(SLOT_BYTES), *back = malloc(SLOT_BYTES);
	if (!out || !in || !rma || !back)
		die("malloc", 0);
	uint64_t total = 0, fetched = 0, one;
	void *ctx[4];
	/* The counter's value now (it holds what earlier incarnations added). */
	one = 0;
	RETRY(fi_fetch_atomic(C.ep, &one, 1, NULL, &total, NULL, srv, (uint64_t)slot * 8, KEY_COUNTERS, FI_UINT64, FI_SUM,
			      &total),
	      "fi_fetch_atomic");
	ctx[0] = &total;
	wait_all(ctx, 1, "atomic");
	double end = now_sec() + secs;
	unsigned long ops = 0;
	while (now_sec() < end) {
		if (!strcmp(mode, "slow")) {
			static char *outs[4], *ins[4];
			for (int i = 0; i < 4; i++) {
				if (!outs[i] && (!(outs[i] = malloc(MAX_MSG)) || !(ins[i] = malloc(MAX_MSG))))
					die("malloc", 0);
				make_msg(outs[i], MAX_MSG, K_TECHO);
				uint64_t tag = ((struct hdr *)outs[i])->seq;
				RETRY(fi_trecv(C.ep, ins[i], MAX_MSG, NULL, srv, tag, 0, ins[i]), "fi_trecv");
				RETRY(fi_tsend(C.ep, outs[i], MAX_MSG, NULL, srv, tag, outs[i]), "fi_tsend");
			}
			usleep(2000000);
			void *all[8];
			for (int i = 0; i < 4; i++)
				all[2 * i] = outs[i], all[2 * i + 1] = ins[i];
			wait_all(all, 8, "slow echoes");
			for (int i = 0; i < 4; i++)
				if (memcmp(outs[i], ins[i], MAX_MSG))
					die("CORRUPT slow echo", i);
			ops += 4;
			continue;
		}
		if (!strcmp(mode, "flood")) {
			for (int i = 0; i < 2000; i++) {
				char m[HDR + 32];
				make_msg(m, sizeof(m), K_FLOOD);
				RETRY(fi_inject(C.ep, m, sizeof(m), srv), "fi_inject");
			}
			echo(srv, 0, HDR + 8, out, in);
			ops += 2001;
			continue;
		}
		switch (rnd() % 4) {
		case 0:
		case 1:
			echo(srv, (int)(rnd() & 1), msg_len(), out, in);
			break;
		case 2: {
			size_t len = 1 + rnd() % SLOT_BYTES, off = rnd() % (SLOT_BYTES - len + 1);
			uint64_t a = (uint64_t)slot * SLOT_BYTES + off;
			fill(rma, len, (unsigned)(me + ops));
			RETRY(fi_write(C.ep, rma, len, NULL, srv, a, KEY_REGION, rma), "fi_write");
			ctx[0] = rma;
			wait_all(ctx, 1, "RMA write");
			memset(back, 0, len);
			RETRY(fi_read(C.ep, back, len, NULL, srv, a, KEY_REGION, back), "fi_read");
			ctx[0] = back;
			wait_all(ctx, 1, "RMA read");
			if (memcmp(rma, back, len)) {
				fprintf(stderr, "rf_soak client %d: CORRUPT RMA read back (%zu bytes at %llu)\n", getpid(), len,
					(unsigned long long)a);
				exit(1);
			}
			break;
		}
		default: {
			one = 1 + rnd() % 1000;
			RETRY(fi_fetch_atomic(C.ep, &one, 1, NULL, &fetched, NULL, srv, (uint64_t)slot * 8, KEY_COUNTERS, FI_UINT64,
					      FI_SUM, &fetched),
			      "fi_fetch_atomic");
			ctx[0] = &fetched;
			wait_all(ctx, 1, "atomic");
			if (fetched != total) {
				fprintf(stderr, "rf_soak client %d: CORRUPT atomic: fetched %llu, the running total is %llu\n",
					getpid(), (unsigned long long)fetched, (unsigned long long)total);
				exit(1);
			}
			total += one;
			break;
		}
		}
		ops++;
	}
	printf("rf_soak client %d (%s, slot %d): %lu operations checked\n", getpid(), mode, slot, ops);
	fflush(stdout);
	end_close(&C);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	(void)h_cur_failed; /* harness.h's, for its test programs */
	if (argc >= 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc >= 7 && !strcmp(argv[1], "client")) {
		if (argc >= 9 && !strcmp(argv[7], "-X") && !strcmp(argv[8], "corrupt"))
			corrupt = 1;
		return client(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5], atof(argv[6]));
	}
	fprintf(stderr, "usage: rf_soak server <addr file> | client <addr file> <index> <gen> normal|witness|slow|flood <seconds> [-X corrupt]\n");
	return 2;
}
