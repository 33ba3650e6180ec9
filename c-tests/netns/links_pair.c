/*
 * links_pair: two links between two "hosts" (c-tests/netns/links.sh: two
 * network namespaces joined by two veth pairs, FI_RUSTFAB_TCP_LINKS naming
 * the second pair's interface on each side). The client sends, the server
 * receives and checks every byte; the client reads its own interfaces' byte
 * counters (/sys/class/net/IF/statistics/tx_bytes: `ip netns exec` mounts
 * the namespace's sysfs) and brings its second link down and up again.
 *
 *   links_pair server|client <fifo to peer> <fifo from peer> <link0 if> <link1 if>
 *
 * Scenarios (each prints "ok <name>" or "FAIL <name>"):
 *   striping      64 x 1 MiB (one chunk each), then 16 x 4 MiB (four
 *                 chunks each) in a window of 16: both links carry at
 *                 least a quarter of the bytes;
 *   link_loss     256 x 1 MiB; after the first 32 complete, link 1 goes
 *                 down (ip link set IF down): every message still arrives
 *                 intact, no error completion on either side;
 *   link_back     link 1 comes up again: within 30 s of messages its
 *                 counter moves by at least 4 MiB again (the link was
 *                 dialed again and carries chunks), data checked.
 */
#include "../rdm_common.h"
#include "oob.h"
#include <signal.h>

static int server;
static struct end me;
static const char *if0, *if1;

#define MSG (1 << 20)
#define BIGMSG (4 << 20)
#define WINDOW 16

static unsigned char *bufs[WINDOW];

static uint64_t tx_bytes(const char *ifname)
{
	char path[256];
	snprintf(path, sizeof path, "/sys/class/net/%s/statistics/tx_bytes", ifname);
	FILE *f = fopen(path, "r");
	unsigned long long v = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

static int set_link(const char *ifname, const char *state)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "ip link set %s %s", ifname, state);
	return system(cmd);
}

/* Progress only (completions are stashed) for `sec` seconds. */
static void idle(double sec)
{
	double until = now_sec() + sec;
	while (now_sec() < until) {
		poke1(&me);
		usleep(1000);
	}
}

/*
 * `n` messages of MSG bytes from the client to the server, WINDOW in
 * flight, message i filled with seed `seed0 + i`; the server checks each.
 * Messages match in order (msg_order FI_ORDER_SAS) but may complete in any
 * order (comp_order FI_ORDER_NONE): message i's buffer is used again only
 * once it completed. After `at` messages completed (at the client), `hook`
 * runs once. Returns 0, or -1 after reporting the failure.
 */
static int transfer(int n, size_t size, unsigned seed0, int at, void (*hook)(void))
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	static char complete[1024];
	int posted = 0, done = 0, lowest = 0;
	if (n > (int)sizeof complete)
		return -1;
	memset(complete, 0, sizeof complete);
	while (done < n) {
		while (posted < n && posted < lowest + WINDOW) {
			unsigned char *b = bufs[posted % WINDOW];
			ssize_t r;
			if (server) {
				r = POST(fi_recv(me.ep, b, size, NULL, FI_ADDR_UNSPEC, (void *)(uintptr_t)(posted + 1)),
					 &me, NULL);
			} else {
				fill(b, size, seed0 + (unsigned)posted);
				r = POST(fi_send(me.ep, b, size, NULL, me.peer, (void *)(uintptr_t)(posted + 1)), &me,
					 NULL);
			}
			if (r) {
				printf("  post %d: %s\n", posted, fi_strerror((int)-r));
				return -1;
			}
			posted++;
		}
		memset(&err, 0, sizeof err);
		int w = wait_comp(&me, NULL, &c, &err, NULL, 60);
		if (w != 1) {
			printf("  %d of %d messages: %s (err %d %s, prov_errno %d)\n", done, n,
			       w == -FI_EAVAIL ? "error completion" : "no completion", err.err, fi_strerror(err.err),
			       err.prov_errno);
			return -1;
		}
		uintptr_t id = (uintptr_t)c.op_context;
		if (id < 1 || id > (uintptr_t)posted || complete[id - 1]) {
			printf("  completion for %lu: not a message in flight\n", (unsigned long)id);
			return -1;
		}
		int i = (int)id - 1;
		if (server) {
			if (c.len != size || !check_fill(bufs[i % WINDOW], size, seed0 + (unsigned)i)) {
				printf("  message %d: wrong data or length (%zu)\n", i, c.len);
				return -1;
			}
		}
		complete[i] = 1;
		while (lowest < n && complete[lowest])
			lowest++;
		done++;
		if (!server && done == at && hook)
			hook();
	}
	return 0;
}

static void exchange_names(void)
{
	char peer[128];
	send_u64(me.addrlen);
	oob_write(me.addr, me.addrlen);
	size_t plen = recv_u64();
	if (plen > sizeof peer) {
		printf("bad name length\n");
		exit(2);
	}
	oob_read(peer, plen);
	if (fi_av_insert(me.av, peer, 1, &me.peer, 0, NULL) != 1) {
		printf("fi_av_insert failed\n");
		exit(2);
	}
}

/* The connection is made and the second link dialed while both progress. */
static void warm_up(void)
{
	char b[8] = "hi";
	struct fi_cq_tagged_entry c;
	if (server) {
		fi_recv(me.ep, b, sizeof b, NULL, FI_ADDR_UNSPEC, NULL);
		wait_comp(&me, NULL, &c, NULL, NULL, 30);
	} else {
		POST(fi_send(me.ep, b, sizeof b, NULL, me.peer, NULL), &me, NULL);
		wait_comp(&me, NULL, &c, NULL, NULL, 30);
	}
	if (!getenv("LINKS_NO_WARMUP"))
		idle(1.0);
}

TEST(striping)
{
	uint64_t a0 = 0, a1 = 0;
	if (!server) {
		a0 = tx_bytes(if0);
		a1 = tx_bytes(if1);
	}
	CHECK_OK(transfer(64, MSG, 1, 0, NULL));
	CHECK_OK(transfer(16, BIGMSG, 50, 0, NULL));
	sync_peer();
	if (!server) {
		uint64_t d0 = tx_bytes(if0) - a0, d1 = tx_bytes(if1) - a1;
		printf("  %s +%llu bytes, %s +%llu bytes\n", if0, (unsigned long long)d0, if1,
		       (unsigned long long)d1);
		CHECK(d0 >= 32ull * MSG);
		CHECK(d1 >= 32ull * MSG);
	}
}

static void link1_down(void)
{
	printf("  %s down (32 of 256 messages done)\n", if1);
	if (set_link(if1, "down"))
		printf("  ip link set %s down failed\n", if1);
}

TEST(link_loss)
{
	double t0 = now_sec();
	CHECK_OK(transfer(256, MSG, 100, 32, link1_down));
	sync_peer();
	printf("  256 MiB in %.1f s\n", now_sec() - t0);
}

TEST(link_back)
{
	if (!server)
		CHECK_OK(set_link(if1, "up"));
	sync_peer();
	int moved = 0;
	for (int round = 0; round < 30 && !moved; round++) {
		uint64_t a1 = server ? 0 : tx_bytes(if1);
		CHECK_OK(transfer(16, MSG, 1000 + (unsigned)round * 16, 0, NULL));
		if (!server) {
			uint64_t d1 = tx_bytes(if1) - a1;
			moved = d1 >= 4ull * MSG;
			if (moved)
				printf("  %s carries again: +%llu bytes in round %d\n", if1, (unsigned long long)d1,
				       round);
		}
		send_u64((uint64_t)moved);
		moved = (int)recv_u64() || moved;
		if (!moved)
			idle(1.0); /* both progress: the link is dialed again */
	}
	CHECK(moved);
}

int main(int argc, char **argv)
{
	if (argc != 6 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: links_pair server|client <fifo to peer> <fifo from peer> <if0> <if1>\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	server = !strcmp(argv[1], "server");
	if0 = argv[4];
	if1 = argv[5];
	if (oob_open(server, argv[2], argv[3]))
		return 2;
	struct end_opts o = {.caps = FI_MSG | FI_TAGGED};
	int ret = end_open(&me, &o);
	if (ret) {
		printf("end_open: %s\n", fi_strerror(-ret));
		return 1;
	}
	for (int i = 0; i < WINDOW; i++) {
		bufs[i] = malloc(BIGMSG);
		if (!bufs[i])
			return 1;
	}
	exchange_names();
	warm_up();
	sync_peer();
#define STEP(name)                  \
	do {                        \
		RUN(name);          \
		if (h_failed)       \
			goto out;   \
		sync_peer();        \
	} while (0)
	STEP(striping);
	STEP(link_loss);
	STEP(link_back);
out:
	end_close(&me);
	return harness_done();
}
