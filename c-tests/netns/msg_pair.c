/*
 * msg_pair: connected (FI_EP_MSG) endpoints between two network namespaces
 * over rustfab tcp, run by netns/run.sh (server in namespace A, client in
 * namespace B, a FIFO pair as control channel, as rdm_pair).
 *
 *   msg_pair server|client <fifo to peer> <fifo from peer> <link to cut>
 *
 * 1. connect with 256 bytes of connection data each way, 1 MiB and 100
 *    small messages both ways, fi_shutdown: one FI_SHUTDOWN on each side;
 * 2. partition after connect (docs/reliability.md F7): the client takes its link
 *    down while the server has a send outstanding and both have receives
 *    posted; both sides get FI_SHUTDOWN and error completions within the
 *    keepalive / user timeout (15 s) plus 5 s, the server's send included.
 */
#include "../rdm_common.h"
#include "oob.h"
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>

#define CM_MAX 256

static int server;
static const char *link_name;

struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_eq *eq;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_pep *pep;
};

static void side_close(struct side *s)
{
	if (s->ep)
		fi_close(&s->ep->fid);
	if (s->pep)
		fi_close(&s->pep->fid);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->domain)
		fi_close(&s->domain->fid);
	if (s->eq)
		fi_close(&s->eq->fid);
	if (s->fabric)
		fi_close(&s->fabric->fid);
	if (s->info)
		fi_freeinfo(s->info);
	memset(s, 0, sizeof(*s));
}

static struct fi_info *hints(void)
{
	struct fi_info *h = rf_hints("tcp", FI_EP_MSG);
	h->caps = FI_MSG | FI_TAGGED;
	return h;
}

static int open_fabric(struct side *s, struct fi_info *info)
{
	struct fi_eq_attr ea = {.wait_obj = FI_WAIT_UNSPEC};
	int ret = fi_fabric(info->fabric_attr, &s->fabric, NULL);
	return ret ? ret : fi_eq_open(s->fabric, &ea, &s->eq, NULL);
}

static int open_ep(struct side *s, struct fi_info *info)
{
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
	int ret;
	if ((ret = fi_domain(s->fabric, info, &s->domain, NULL)) || (ret = fi_cq_open(s->domain, &ca, &s->cq, NULL)) ||
	    (ret = fi_endpoint(s->domain, info, &s->ep, NULL)) || (ret = fi_ep_bind(s->ep, &s->eq->fid, 0)) ||
	    (ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV)))
		return ret;
	return fi_enable(s->ep);
}

/* One CM event (blocking read, bounded): its length, or a negative error
 * (error events: -err, the entry in *err). */
static ssize_t cm_event(struct side *s, uint32_t *ev, void *buf, size_t len, struct fi_eq_err_entry *err, int ms)
{
	ssize_t r = fi_eq_sread(s->eq, ev, buf, len, ms, 0);
	if (r == -FI_EAVAIL) {
		if (fi_eq_readerr(s->eq, err, 0) < 0)
			return -FI_EOTHER;
		return -err->err;
	}
	return r;
}

/* Connects (client) or accepts (server) with CM_MAX bytes of data each way;
 * the server's pep name crosses the control channel. */
static int connect_pair(struct side *s)
{
	char data[CM_MAX], buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)buf;
	struct fi_eq_err_entry err = {0};
	uint32_t ev;
	struct fi_info *h = hints();
	int ret;
	memset(s, 0, sizeof(*s));
	if (server) {
		struct fi_info *pi;
		struct sockaddr_in name;
		size_t len = sizeof(name);
		if ((ret = fi_getinfo(FI_VERSION(1, 17), "10.123.0.1", "0", FI_SOURCE, h, &pi)))
			return __LINE__;
		if (open_fabric(s, pi) || fi_passive_ep(s->fabric, pi, &s->pep, NULL) ||
		    fi_pep_bind(s->pep, &s->eq->fid, 0) || fi_listen(s->pep) ||
		    fi_getname(&s->pep->fid, &name, &len))
			return __LINE__;
		fi_freeinfo(pi);
		oob_write(&name, sizeof(name));
		if (cm_event(s, &ev, buf, sizeof(buf), &err, 10000) != (ssize_t)sizeof(buf) || ev != FI_CONNREQ ||
		    !check_fill(cm->data, CM_MAX, 1))
			return __LINE__;
		s->info = cm->info;
		if (open_ep(s, s->info))
			return __LINE__;
		fill(data, CM_MAX, 2);
		if (fi_accept(s->ep, data, CM_MAX))
			return __LINE__;
		if (cm_event(s, &ev, buf, sizeof(buf), &err, 10000) != (ssize_t)sizeof(*cm) || ev != FI_CONNECTED)
			return __LINE__;
	} else {
		struct sockaddr_in name;
		oob_read(&name, sizeof(name));
		h->addr_format = FI_SOCKADDR_IN;
		h->dest_addr = malloc(sizeof(name));
		memcpy(h->dest_addr, &name, sizeof(name));
		h->dest_addrlen = sizeof(name);
		if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &s->info))
			return __LINE__;
		if (open_fabric(s, s->info) || open_ep(s, s->info))
			return __LINE__;
		fill(data, CM_MAX, 1);
		if (fi_connect(s->ep, s->info->dest_addr, data, CM_MAX))
			return __LINE__;
		if (cm_event(s, &ev, buf, sizeof(buf), &err, 10000) != (ssize_t)sizeof(buf) || ev != FI_CONNECTED ||
		    !check_fill(cm->data, CM_MAX, 2))
			return __LINE__;
	}
	fi_freeinfo(h);
	return 0;
}

static int comp(struct side *s, struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err, double timeout)
{
	double end = now_sec() + timeout;
	while (now_sec() < end) {
		ssize_t r = fi_cq_sread(s->cq, e, 1, NULL, 100);
		if (r == 1)
			return 1;
		if (r == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			return fi_cq_readerr(s->cq, err, 0) == 1 ? -FI_EAVAIL : -FI_EOTHER;
		}
		if (r != -FI_EAGAIN)
			return (int)r;
	}
	return 0;
}

TEST(connect_data_shutdown)
{
	struct side s;
	static char tx[1 << 20], rx[1 << 20];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int line = connect_pair(&s);
	if (line)
		FAIL_AT("connect_pair failed at line %d", line);
	/* 1 MiB then 100 small messages, each way. */
	CHECK_OK(fi_recv(s.ep, rx, sizeof rx, NULL, 0, rx));
	sync_peer();
	fill(tx, sizeof tx, server ? 3 : 4);
	CHECK_OK(fi_send(s.ep, tx, sizeof tx, NULL, 0, tx));
	for (int k = 0; k < 2; k++) {
		CHECK_EQ(comp(&s, &e, &err, 30), 1);
		if (e.op_context == rx)
			CHECK(check_fill(rx, sizeof rx, server ? 4 : 3));
	}
	sync_peer();
	for (int i = 0; i < 100; i++)
		CHECK_OK(fi_trecv(s.ep, rx + i * 64, 64, NULL, 0, (uint64_t)i, 0, NULL));
	sync_peer();
	for (int i = 0; i < 100; i++) {
		fill(tx + i * 64, 64, (unsigned)i);
		CHECK_OK(fi_tsend(s.ep, tx + i * 64, 64, NULL, 0, (uint64_t)i, NULL));
	}
	for (int k = 0; k < 200; k++)
		CHECK_EQ(comp(&s, &e, &err, 30), 1);
	for (int i = 0; i < 100; i++)
		CHECK(check_fill(rx + i * 64, 64, (unsigned)i));
	sync_peer();
	char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_err_entry eqerr = {0};
	uint32_t ev;
	if (server)
		CHECK_OK(fi_shutdown(s.ep, 0));
	CHECK_EQ(cm_event(&s, &ev, buf, sizeof(buf), &eqerr, 10000), sizeof(struct fi_eq_cm_entry));
	CHECK_EQ(ev, FI_SHUTDOWN);
	sync_peer();
	side_close(&s);
}

TEST(partition_after_connect)
{
	struct side s;
	static char tx[4 << 20], rx[4][64];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int line = connect_pair(&s);
	if (line)
		FAIL_AT("connect_pair failed at line %d", line);
	for (int k = 0; k < 4; k++)
		CHECK_OK(fi_recv(s.ep, rx[k], 64, NULL, 0, rx[k]));
	sync_peer();
	if (!server) {
		char cmd[128];
		snprintf(cmd, sizeof cmd, "ip link set %s down", link_name);
		CHECK_EQ(system(cmd), 0);
	}
	sync_peer(); /* the link is down */
	double t0 = now_sec();
	int outstanding = 4;
	if (server) {
		/* Data the peer can no longer acknowledge: the user timeout. */
		CHECK_OK(fi_send(s.ep, tx, sizeof tx, NULL, 0, tx));
		outstanding++;
	}
	char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_err_entry eqerr = {0};
	uint32_t ev;
	ssize_t r = cm_event(&s, &ev, buf, sizeof(buf), &eqerr, 40000);
	double dt = now_sec() - t0;
	printf("    %s: FI_SHUTDOWN after %.1f s\n", server ? "server" : "client", dt);
	CHECK_EQ(r, sizeof(struct fi_eq_cm_entry));
	CHECK_EQ(ev, FI_SHUTDOWN);
	CHECK(dt < 15 + 5 + 2);
	for (int k = 0; k < outstanding; k++) {
		CHECK_EQ(comp(&s, &e, &err, 5), -FI_EAVAIL);
		CHECK(err.err == FI_ECONNRESET || err.err == FI_ECANCELED);
	}
	CHECK_EQ(fi_send(s.ep, tx, 8, NULL, 0, NULL), -FI_ENOTCONN);
	sync_peer();
	side_close(&s);
}

int main(int argc, char **argv)
{
	if (argc != 5 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: msg_pair server|client <fifo to peer> <fifo from peer> <link>\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	server = !strcmp(argv[1], "server");
	link_name = argv[4];
	if (oob_open(server, argv[2], argv[3]))
		return 2;
	RUN(connect_data_shutdown);
	if (!h_failed)
		RUN(partition_after_connect);
	return harness_done();
}
