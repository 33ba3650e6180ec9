/*
 * FI_EP_DGRAM (fi_endpoint(3)) over the rustfab transport RF_TRANSPORT names
 * (shm, tcp or auto): fi_getinfo's datagram entry (max_msg_size is what one
 * datagram carries: one shm record, one UDP datagram on tcp, whose
 * addresses are socket addresses), then messages and tagged messages of
 * every size up to max_msg_size with their bytes checked, remote CQ data,
 * FI_SOURCE, inject, a message over max_msg_size refused with
 * -FI_EMSGSIZE, a too-small receive buffer (FI_ETRUNC), a blocking read on
 * a CQ with an FD wait object, on tcp a hostile UDP sender whose
 * datagrams reach no receive, and sends to addresses nobody holds (an
 * endpoint closed, a process dead before or after contact) completing
 * while the datagrams are lost.
 */
#include "rdm_common.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

static int is_tcp(void)
{
	return strcmp(rf_transport(), "tcp") == 0;
}

/* One datagram endpoint; `wait_obj` for its CQ. */
static int dgram_open(struct end *e, enum fi_wait_obj wait_obj)
{
	struct end_opts o = {0};
	o.ep_type = FI_EP_DGRAM;
	o.caps = FI_MSG | FI_TAGGED | FI_SOURCE;
	o.wait_obj = wait_obj;
	return end_open(e, &o);
}

static int dgram_pair(struct end *a, struct end *b)
{
	int ret;
	if ((ret = dgram_open(a, FI_WAIT_NONE)) || (ret = dgram_open(b, FI_WAIT_NONE)))
		return ret;
	return ends_connect(a, b);
}

TEST(getinfo_offers_one_datagram_per_message)
{
	struct fi_info *i = rf_getinfo(rf_transport(), FI_EP_DGRAM, FI_MSG | FI_TAGGED);
	CHECK(i != NULL);
	size_t max = i->ep_attr->max_msg_size;
	uint64_t caps = i->caps;
	uint32_t fmt = i->addr_format;
	int type = i->ep_attr->type;
	fi_freeinfo(i);
	CHECK_EQ(type, FI_EP_DGRAM);
	CHECK_EQ(max, is_tcp() ? 65507 - 64 : 16384);
	CHECK(caps & FI_MSG && caps & FI_TAGGED);
	CHECK_EQ(caps & (FI_RMA | FI_ATOMIC), 0);
	if (is_tcp())
		CHECK_EQ(fmt, FI_SOCKADDR_IN);
	/* Datagram endpoints carry no RMA. */
	CHECK(rf_getinfo(rf_transport(), FI_EP_DGRAM, FI_MSG | FI_RMA) == NULL);
}

TEST(tcp_endpoints_are_named_by_their_udp_socket_address)
{
	if (!is_tcp())
		return;
	struct end a;
	CHECK_OK(dgram_open(&a, FI_WAIT_NONE));
	CHECK_EQ(a.addrlen, sizeof(struct sockaddr_in));
	struct sockaddr_in sin;
	memcpy(&sin, a.addr, sizeof(sin));
	CHECK_EQ(sin.sin_family, AF_INET);
	CHECK(sin.sin_port != 0);
	/* A UDP socket can be bound to neither port while the endpoint has it. */
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(s >= 0);
	CHECK(bind(s, (struct sockaddr *)&sin, sizeof(sin)) != 0 && errno == EADDRINUSE);
	close(s);
	end_close(&a);
}

TEST(messages_of_every_size_arrive_whole_with_source_and_data)
{
	struct end a, b;
	CHECK_OK(dgram_pair(&a, &b));
	size_t max = a.info->ep_attr->max_msg_size;
	size_t sizes[] = {0, 1, 100, 4096, 8191, max - 1, max};
	unsigned char *sbuf = malloc(max), *rbuf = malloc(max + 64);
	CHECK(sbuf && rbuf);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (int mode = 0; mode < 3; mode++) { /* send, tagged send, senddata */
			size_t n = sizes[k];
			unsigned seed = (unsigned)(k * 3 + mode + 1);
			struct fi_cq_tagged_entry c;
			struct fi_cq_err_entry err;
			fi_addr_t src = FI_ADDR_UNSPEC;
			fill(sbuf, n, seed);
			memset(rbuf, 0xee, max + 64);
			if (mode == 1) {
				CHECK_OK(POST(fi_trecv(b.ep, rbuf, max + 64, NULL, FI_ADDR_UNSPEC, 0x77 + k, 0, rbuf), &a, &b));
				CHECK_OK(POST(fi_tsend(a.ep, sbuf, n, NULL, a.peer, 0x77 + k, sbuf), &a, &b));
			} else {
				CHECK_OK(POST(fi_recv(b.ep, rbuf, max + 64, NULL, FI_ADDR_UNSPEC, rbuf), &a, &b));
				if (mode == 0)
					CHECK_OK(POST(fi_send(a.ep, sbuf, n, NULL, a.peer, sbuf), &a, &b));
				else
					CHECK_OK(POST(fi_senddata(a.ep, sbuf, n, NULL, 1000 + k, a.peer, sbuf), &a, &b));
			}
			CHECK_EQ(wait_comp(&a, &b, &c, &err, NULL, 10), 1);
			CHECK(c.op_context == sbuf);
			CHECK(c.flags & FI_SEND);
			CHECK_EQ(wait_comp(&b, &a, &c, &err, &src, 10), 1);
			CHECK(c.op_context == rbuf);
			CHECK_EQ(c.len, n);
			if (!check_fill(rbuf, n, seed) || !all_bytes(rbuf + n, max + 64 - n, 0xee))
				FAIL_AT("%zu bytes (mode %d): payload wrong", n, mode);
			/* FI_SOURCE: the sender, as b's AV knows it. */
			CHECK_EQ(src, b.peer);
			if (mode == 1) {
				CHECK(c.flags & FI_TAGGED);
				CHECK_EQ(c.tag, 0x77 + k);
			}
			if (mode == 2) {
				CHECK(c.flags & FI_REMOTE_CQ_DATA);
				CHECK_EQ(c.data, 1000 + k);
			}
		}
	}
	/* inject: the buffer is the application's again at return. */
	CHECK_OK(POST(fi_recv(b.ep, rbuf, max, NULL, FI_ADDR_UNSPEC, rbuf), &a, &b));
	fill(sbuf, 64, 99);
	CHECK_OK(POST(fi_inject(a.ep, sbuf, 64, a.peer), &a, &b));
	memset(sbuf, 0, 64);
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	CHECK_EQ(wait_comp(&b, &a, &c, &err, NULL, 10), 1);
	CHECK_EQ(c.len, 64);
	CHECK(check_fill(rbuf, 64, 99));
	free(sbuf);
	free(rbuf);
	end_close(&a);
	end_close(&b);
}

TEST(a_message_over_max_msg_size_is_refused)
{
	struct end a, b;
	CHECK_OK(dgram_pair(&a, &b));
	size_t max = a.info->ep_attr->max_msg_size;
	unsigned char *buf = calloc(1, max + 1);
	CHECK(buf != NULL);
	CHECK_EQ(fi_send(a.ep, buf, max + 1, NULL, a.peer, buf), -FI_EMSGSIZE);
	CHECK_EQ(fi_tsend(a.ep, buf, max + 1, NULL, a.peer, 1, buf), -FI_EMSGSIZE);
	/* Nothing was sent: no completion on either side. */
	struct fi_cq_tagged_entry c;
	CHECK_EQ(wait_comp(&a, &b, &c, NULL, NULL, 0.2), 0);
	free(buf);
	end_close(&a);
	end_close(&b);
}

TEST(a_short_receive_buffer_truncates)
{
	struct end a, b;
	CHECK_OK(dgram_pair(&a, &b));
	unsigned char sbuf[1000], rbuf[100];
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	fill(sbuf, sizeof(sbuf), 4);
	CHECK_OK(POST(fi_recv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, rbuf), &a, &b));
	CHECK_OK(POST(fi_send(a.ep, sbuf, sizeof(sbuf), NULL, a.peer, sbuf), &a, &b));
	memset(&err, 0, sizeof(err));
	CHECK_EQ(wait_comp(&b, &a, &c, &err, NULL, 10), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ETRUNC);
	CHECK(err.op_context == rbuf);
	CHECK_EQ(err.olen, sizeof(sbuf) - sizeof(rbuf));
	CHECK(check_fill(rbuf, sizeof(rbuf), 4));
	end_close(&a);
	end_close(&b);
}

struct late_send {
	struct end *a;
	void *buf;
	size_t len;
	ssize_t ret;
};

static void *late_send(void *arg)
{
	struct late_send *ls = arg;
	usleep(100 * 1000);
	ls->ret = fi_send(ls->a->ep, ls->buf, ls->len, NULL, ls->a->peer, NULL);
	/* The send's completion, so that the endpoint closes clean. */
	struct fi_cq_tagged_entry c;
	for (int i = 0; i < 1000 && fi_cq_read(ls->a->cq, &c, 1) == -FI_EAGAIN; i++)
		usleep(1000);
	return NULL;
}

TEST(a_blocking_read_wakes_on_an_arrival)
{
	struct end a, b;
	CHECK_OK(dgram_open(&a, FI_WAIT_NONE));
	CHECK_OK(dgram_open(&b, FI_WAIT_FD));
	CHECK_OK(ends_connect(&a, &b));
	int fd = -1;
	CHECK_OK(fi_control(&b.cq->fid, FI_GETWAIT, &fd));
	CHECK(fd >= 0);
	unsigned char sbuf[300], rbuf[300];
	fill(sbuf, sizeof(sbuf), 8);
	CHECK_OK(fi_recv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, rbuf));
	/* Nothing yet: the CQ's fd is not readable once fi_trywait says so. */
	struct fid *f = &b.cq->fid;
	if (fi_trywait(b.fabric, &f, 1) == 0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		CHECK_EQ(poll(&p, 1, 50), 0);
	}
	/* Another thread sends once this one is blocked. */
	struct late_send ls = {.a = &a, .buf = sbuf, .len = sizeof(sbuf), .ret = 1};
	pthread_t t;
	CHECK_OK(pthread_create(&t, NULL, late_send, &ls));
	struct fi_cq_tagged_entry c;
	double t0 = now_sec();
	ssize_t r = fi_cq_sread(b.cq, &c, 1, NULL, (int)(10000 * rf_time_scale()));
	pthread_join(t, NULL);
	CHECK_EQ(ls.ret, 0);
	CHECK_EQ(r, 1);
	CHECK(now_sec() - t0 < 9 * rf_time_scale());
	CHECK_EQ(c.len, sizeof(sbuf));
	CHECK(check_fill(rbuf, sizeof(rbuf), 8));
	end_close(&a);
	end_close(&b);
}

TEST(hostile_udp_datagrams_reach_no_receive)
{
	if (!is_tcp())
		return;
	struct end a, b;
	CHECK_OK(dgram_pair(&a, &b));
	struct sockaddr_in to;
	memcpy(&to, b.addr, sizeof(to));
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(s >= 0);
	unsigned char junk[2048];
	fill(junk, sizeof(junk), 3);
	/* Short, header-sized garbage, a valid-looking start, oversized. */
	size_t lens[] = {0, 1, 63, 64, 65, 1000, sizeof(junk)};
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
		CHECK(sendto(s, junk, lens[k], 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)lens[k]);
	/* A copy of a real datagram's header with a payload length that lies:
	 * the magic/version/op of an EAGER record, 8 bytes said, 4 there. */
	unsigned char liar[68] = {0x46, 0x52, 1, 1};
	liar[8] = 8;  /* len */
	liar[48] = 8; /* payload */
	CHECK(sendto(s, liar, sizeof(liar), 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)sizeof(liar));
	close(s);
	unsigned char rbuf[256], sbuf[200];
	fill(sbuf, sizeof(sbuf), 12);
	CHECK_OK(POST(fi_recv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, rbuf), &a, &b));
	/* The garbage completes nothing. */
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	CHECK_EQ(wait_comp(&b, &a, &c, &err, NULL, 0.3), 0);
	/* The real message takes the receive. */
	CHECK_OK(POST(fi_send(a.ep, sbuf, sizeof(sbuf), NULL, a.peer, sbuf), &a, &b));
	CHECK_EQ(wait_comp(&b, &a, &c, &err, NULL, 10), 1);
	CHECK_EQ(c.len, sizeof(sbuf));
	CHECK(check_fill(rbuf, sizeof(sbuf), 12));
	end_close(&a);
	end_close(&b);
}

/* Sends `n` datagrams of `len` bytes from `a` to `to`, each posted and its
 * completion read: 0 when every one completed without error. */
static int send_n(struct end *a, struct end *b, fi_addr_t to, unsigned char *buf, size_t len, int n)
{
	for (int k = 0; k < n; k++) {
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		ssize_t r = POST(fi_send(a->ep, buf, len, NULL, to, buf + k % 8), a, b);
		if (r) {
			fprintf(stderr, "  send %d of %d: %zd (%s)\n", k, n, r, fi_strerror((int)-r));
			return (int)r;
		}
		memset(&err, 0, sizeof(err));
		int w = wait_comp(a, b, &c, &err, NULL, 10);
		if (w != 1 || c.op_context != buf + k % 8) {
			fprintf(stderr, "  send %d of %d: completion %d (err %d)\n", k, n, w, err.err);
			return -FI_EOTHER;
		}
	}
	return 0;
}

/* A child opens a datagram endpoint and writes its address (length, bytes)
 * to `fd`; with `wait_one`, it then receives one datagram, writes 'r' once
 * its 64 bytes are right, and waits to be killed; without, it is killed by
 * its own hand at once (its endpoint never closed). */
static pid_t absent_child(int fd, int wait_one)
{
	pid_t pid = rf_fork();
	if (pid != 0)
		return pid;
	struct end d;
	if (dgram_open(&d, FI_WAIT_NONE))
		_exit(2);
	if (write(fd, &d.addrlen, sizeof(d.addrlen)) != sizeof(d.addrlen) ||
	    write(fd, d.addr, d.addrlen) != (ssize_t)d.addrlen)
		_exit(3);
	if (!wait_one)
		raise(SIGKILL);
	unsigned char rbuf[64];
	struct fi_cq_tagged_entry c;
	if (fi_recv(d.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, rbuf) ||
	    wait_comp(&d, NULL, &c, NULL, NULL, 10) != 1 || c.len != 64 || !check_fill(rbuf, 64, 21))
		_exit(4);
	if (write(fd, "r", 1) != 1)
		_exit(5);
	for (;;)
		pause();
}

static int read_addr(int fd, struct end *a, fi_addr_t *out)
{
	size_t len = 0;
	char addr[128];
	if (read(fd, &len, sizeof(len)) != sizeof(len) || len > sizeof(addr) || read(fd, addr, len) != (ssize_t)len)
		return -FI_EIO;
	return fi_av_insert(a->av, addr, 1, out, 0, NULL) == 1 ? 0 : -FI_EINVAL;
}

/*
 * fi_endpoint(3): datagrams are unreliable. A send to an address nobody
 * holds completes as sent and the datagram is lost, whether the endpoint
 * there was never opened (or closed), its process died before we reached
 * it, or died after (its ring fills, then the failure is found); sends to
 * a live peer arrive meanwhile and after.
 */
TEST(a_send_to_an_absent_peer_completes_and_is_lost)
{
	struct end a, b, c;
	CHECK_OK(dgram_pair(&a, &b));
	fi_addr_t closed, died_early, died_late;
	/* An endpoint opened and closed: nobody holds its address now. */
	CHECK_OK(dgram_open(&c, FI_WAIT_NONE));
	CHECK_EQ(fi_av_insert(a.av, c.addr, 1, &closed, 0, NULL), 1);
	end_close(&c);
	/* A process that died holding its endpoint, before any contact. */
	int p1[2], p2[2];
	CHECK_OK(pipe(p1));
	CHECK_OK(pipe(p2));
	pid_t early = absent_child(p1[1], 0);
	CHECK(early > 0);
	CHECK_OK(read_addr(p1[0], &a, &died_early));
	CHECK_EQ(waitpid(early, NULL, 0), early);
	/* One alive when reached, killed after. */
	pid_t late = absent_child(p2[1], 1);
	CHECK(late > 0);
	CHECK_OK(read_addr(p2[0], &a, &died_late));
	size_t big = 16384;
	unsigned char *sbuf = calloc(1, big), rbuf[256];
	CHECK(sbuf != NULL);
	fill(sbuf, 64, 21);
	CHECK_OK(send_n(&a, &b, died_late, sbuf, 64, 1));
	char r = 0;
	CHECK_EQ(read(p2[0], &r, 1), 1);
	CHECK_EQ(r, 'r');
	kill(late, SIGKILL);
	CHECK_EQ(waitpid(late, NULL, 0), late);

	CHECK_OK(send_n(&a, &b, closed, sbuf, 64, 3));
	CHECK_OK(send_n(&a, &b, died_early, sbuf, 64, 3));
	/* More than its ring holds (1 MiB on shm by default). */
	CHECK_OK(send_n(&a, &b, died_late, sbuf, big, 150));
	fill(sbuf, 200, 22);
	CHECK_OK(POST(fi_recv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, rbuf), &a, &b));
	CHECK_OK(send_n(&a, &b, a.peer, sbuf, 200, 1));
	struct fi_cq_tagged_entry e;
	CHECK_EQ(wait_comp(&b, &a, &e, NULL, NULL, 10), 1);
	CHECK_EQ(e.len, 200);
	CHECK(check_fill(rbuf, 200, 22));
	/* And again, after more sends to the absent ones. */
	CHECK_OK(send_n(&a, &b, closed, sbuf, 64, 2));
	CHECK_OK(send_n(&a, &b, died_late, sbuf, 64, 2));
	fill(sbuf, 100, 23);
	CHECK_OK(POST(fi_recv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, rbuf), &a, &b));
	CHECK_OK(send_n(&a, &b, a.peer, sbuf, 100, 1));
	CHECK_EQ(wait_comp(&b, &a, &e, NULL, NULL, 10), 1);
	CHECK_EQ(e.len, 100);
	CHECK(check_fill(rbuf, 100, 23));
	free(sbuf);
	close(p1[0]);
	close(p1[1]);
	close(p2[0]);
	close(p2[1]);
	end_close(&a);
	end_close(&b);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(getinfo_offers_one_datagram_per_message);
	RUN(tcp_endpoints_are_named_by_their_udp_socket_address);
	RUN(messages_of_every_size_arrive_whole_with_source_and_data);
	RUN(a_message_over_max_msg_size_is_refused);
	RUN(a_short_receive_buffer_truncates);
	RUN(a_blocking_read_wakes_on_an_arrival);
	RUN(hostile_udp_datagrams_reach_no_receive);
	RUN(a_send_to_an_absent_peer_completes_and_is_lost);
	return harness_done();
}
