/*
 * Peer budgets (docs/security.md "Peer budgets"): a hostile TCP peer that
 * says a plain HELLO, then streams requests whose answers it never takes
 * (it reads its socket at 8 KiB/s), must not grow the endpoint's memory
 * beyond the documented bound, while an honest peer's ping-pong with the
 * same endpoint goes on. Two floods: READ_REQ records (an RMA_ACK answers
 * each: any key is refused) and tagged eager messages asking for delivery
 * complete (an ACK answers each) to an endpoint that keeps receives posted.
 *
 * One process: the endpoint under attack (A), the honest peer (B) and the
 * flooder (a raw socket), driven in turn; A's memory is this process's
 * VmRSS. RF_FLOOD_SECS sets each flood's length (default 6; the acceptance
 * run is 60, which also holds B's median round trip to twice its unloaded
 * one). The flooder reconnects when it is cut off (its budget's timeout).
 * Always over tcp on loopback.
 */
#include "rdm_common.h"
#include "flood_common.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#define SLOW_READ_BPS 8192




/* The 64-byte record header (docs/protocol.md), little-endian. */
static void put_hdr(uint8_t *h, uint8_t op, uint32_t flags, uint64_t len, uint64_t tag, uint64_t msg_id,
		    uint32_t payload, uint32_t aux)
{
	memset(h, 0, 64);
	h[0] = 0x46;
	h[1] = 0x52;
	h[2] = 1;
	h[3] = op;
	for (int i = 0; i < 4; i++)
		h[4 + i] = (uint8_t)(flags >> (8 * i));
	for (int i = 0; i < 8; i++) {
		h[8 + i] = (uint8_t)(len >> (8 * i));
		h[16 + i] = (uint8_t)(tag >> (8 * i));
		h[32 + i] = (uint8_t)(msg_id >> (8 * i));
	}
	for (int i = 0; i < 4; i++) {
		h[48 + i] = (uint8_t)(payload >> (8 * i));
		h[52 + i] = (uint8_t)(aux >> (8 * i));
	}
}


/* A raw connection to A that says a plain (unkeyed) HELLO claiming
 * 127.0.0.1:`port` and reads A's ACCEPT; non-blocking. */
static int flooder_connect(int port, uint64_t nonce)
{
	uint8_t h[128], ans[128];
	struct sockaddr_in claim = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, "127.0.0.1", &claim.sin_addr);
	put_hdr(h, 6, 0, 64, nonce, 0, 64, 0);
	h[24] = 2; /* HELLO version */
	memcpy(h + 64, &claim, 16);
	memset(h + 80, 0, 48);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in me = claim;
	me.sin_port = 0;
	if (s < 0 || bind(s, (struct sockaddr *)&me, sizeof me) != 0 ||
	    connect(s, (struct sockaddr *)A.addr, sizeof(struct sockaddr_in)) != 0 || write(s, h, sizeof h) != sizeof h) {
		if (s >= 0)
			close(s);
		return -1;
	}
	fcntl(s, F_SETFL, O_NONBLOCK);
	size_t got = 0;
	double deadline = now_sec() + 5 * rf_time_scale();
	while (got < sizeof ans && now_sec() < deadline) {
		drive_a();
		ssize_t r = read(s, ans + got, sizeof ans - got);
		if (r > 0)
			got += (size_t)r;
		else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			break;
	}
	if (got != sizeof ans || ans[3] != 6 || ans[52] != 1) { /* HELLO, ACCEPT */
		close(s);
		return -1;
	}
	return s;
}


/*
 * Floods A with `op` records (READ_REQ, or EAGER with ACK_REQ) for
 * RF_FLOOD_SECS while B ping-pongs with A; checks A's RSS growth and B's
 * progress.
 */
static void flood(int eager)
{
	enum { BATCH = 64, MAX_RTT = 20000 };
	static double unloaded[200], loaded[MAX_RTT];
	struct end_opts ao = {.caps = FI_MSG | FI_TAGGED | FI_RMA};
	CHECK_OK(end_open(&A, &ao));
	CHECK_OK(end_open(&B, &DEF));
	CHECK_OK(ends_connect(&A, &B));
	for (int i = 0; i < FLOOD_RECVS; i++)
		CHECK_OK(fi_trecv(A.ep, flood_rx[i], sizeof flood_rx[i], NULL, FI_ADDR_UNSPEC, TAG_FLOOD, 0,
				  (void *)CTX_FLOOD));
	int nu = 0;
	for (int i = 0; i < 200; i++) {
		double t = round_trip();
		CHECK(t >= 0);
		unloaded[nu++] = t;
	}
	long rss0 = status_kb("VmRSS:"), peak = rss0;
	int port = 30000 + (getpid() % 20000);
	uint64_t nonce = 77;
	int s = flooder_connect(port, nonce++);
	CHECK(s >= 0);
	uint8_t batch[BATCH * 64], junk[SLOW_READ_BPS];
	uint64_t id = 1, sent = 0, cutoffs = 0;
	size_t partial = 0; /* bytes of the current batch written */
	double t0 = now_sec(), end = t0 + flood_secs(), last_sample = 0;
	size_t slow_read = 0;
	int nl = 0, nrtt = 0, failed_rtt = 0;
	unsigned seed = 1;
	while (now_sec() < end) {
		/* The flooder: as many records as the socket takes ... */
		for (int k = 0; k < 16; k++) {
			if (partial == 0) {
				for (int i = 0; i < BATCH; i++, id++) {
					if (eager)
						put_hdr(batch + 64 * i, 1, 1 | 4, 0, TAG_FLOOD, id, 0, 0);
					else
						put_hdr(batch + 64 * i, 10, 0, 64, 0xdeadbeefULL, id, 0, 0);
				}
			}
			ssize_t w = write(s, batch + partial, sizeof batch - partial);
			if (w > 0) {
				partial = (partial + (size_t)w) % sizeof batch;
				sent += (uint64_t)w;
			} else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				break;
			} else {
				/* Cut off: the flooder comes back. */
				close(s);
				cutoffs++;
				partial = 0;
				s = flooder_connect(port, nonce++);
				CHECK(s >= 0);
				if (s < 0)
					goto out;
				break;
			}
		}
		/* ... and reads its answers at 8 KiB/s. */
		size_t allowed = (size_t)((now_sec() - t0) * SLOW_READ_BPS);
		if (allowed > slow_read) {
			size_t want = allowed - slow_read;
			ssize_t r = read(s, junk, want < sizeof junk ? want : sizeof junk);
			if (r > 0)
				slow_read += (size_t)r;
		}
		/* The honest peer. */
		double t = round_trip();
		/* A uniform sample of the round trips (reservoir): the array is
		 * this process's memory too, so it stays small. */
		if (t < 0)
			failed_rtt++;
		else if (nl < MAX_RTT)
			loaded[nl++] = t, nrtt++;
		else if ((int)((seed = seed * 1103515245u + 12345u) % (unsigned)++nrtt) < MAX_RTT)
			loaded[seed % MAX_RTT] = t;
		if (now_sec() - last_sample > 0.05) {
			last_sample = now_sec();
			long r = status_kb("VmRSS:");
			if (r > peak)
				peak = r;
#ifndef __SANITIZE_ADDRESS__
			if (peak - rss0 > RSS_BOUND_KB)
				break; /* failed already: stop before eating the machine */
#endif
		}
	}
out:;
	double um = median(unloaded, nu), lm = median(loaded, nl);
	printf("    %s flood %.0f s: %llu records sent, %zu bytes of answers read, %llu cut-offs; RSS %ld -> peak "
	       "%ld kB (+%ld kB, bound %.0f kB); B: %d round trips (%d failed), median %.1f us (unloaded %.1f us)\n",
	       eager ? "ACK_REQ" : "READ_REQ", now_sec() - t0, (unsigned long long)(sent / 64), slow_read,
	       (unsigned long long)cutoffs, rss0, peak, peak - rss0, (double)RSS_BOUND_KB, nrtt, failed_rtt, lm * 1e6,
	       um * 1e6);
#ifndef __SANITIZE_ADDRESS__
	/* (Under AddressSanitizer, make asan, freed memory sits in its
	 * quarantine: the footprint says nothing about rustfab's.) */
	CHECK(peak - rss0 <= RSS_BOUND_KB);
#endif
	CHECK_EQ(failed_rtt, 0);
	CHECK(nl >= 20);
	CHECK(sent / 64 > 1000); /* it did flood */
	if (flood_secs() >= 60)
		CHECK(lm <= 2 * um);
	if (s >= 0)
		close(s);
	end_close(&A);
	end_close(&B);
}

TEST(read_req_flood_is_bounded)
{
	flood(0);
}

TEST(ack_req_flood_is_bounded)
{
	flood(1);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	setenv("RF_TRANSPORT", "tcp", 1);
	setenv("FI_RUSTFAB_IFACE", "lo", 0);
	unsetenv("FI_RUSTFAB_AUTH_KEY");
	RUN(read_req_flood_is_bounded);
	RUN(ack_req_flood_is_bounded);
	return harness_done();
}
