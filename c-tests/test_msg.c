/*
 * Connection-oriented endpoints (FI_EP_MSG) over the rustfab transport
 * RF_TRANSPORT names (shm, tcp or auto; `make c-tests` runs all three:
 * connection management is TCP on each, the data of shm and auto pairs on
 * this host moves over shm rings, docs/shm.md Connected endpoints): passive
 * endpoints, FI_CONNREQ / fi_accept / fi_reject with connection data,
 * FI_CONNECTED and FI_SHUTDOWN on both sides, error events (rejected,
 * refused port), data and tagged calls on a connected pair, receives posted
 * before connecting, cancellation at fi_shutdown, a peer killed with
 * SIGKILL, blocking EQ reads across processes, hostile clients.
 *
 * Both ends of a pair usually live in this process: each has its own
 * fabric and EQ, and waiting on one end peeks at the other's EQ, which
 * progresses it (EQ reads progress the endpoints bound to the EQ).
 */
#include "rdm_common.h"
#include <arpa/inet.h>
#include <rdma/fi_rma.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>

#define V FI_VERSION(1, 17)
#define CM_MAX 256

struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_eq *eq;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_pep *pep;
	struct sockaddr_in name; /* pep or ep address */
};

/* Mode bits the next srv_open/cli_open asks for (FI_BUFFERED_RECV). */
static uint64_t hint_mode;
/* Caps the next srv_open/cli_open asks for on top of FI_MSG | FI_TAGGED. */
static uint64_t hint_caps;
/* The domain (transport) the next srv_open/cli_open asks for; NULL: RF_TRANSPORT's. */
static const char *hint_transport;
/* tx op_flags the next srv_open/cli_open asks for (a completion level). */
static uint64_t hint_tx_flags;

static struct fi_info *msg_hints(void)
{
	struct fi_info *h = rf_hints(hint_transport ? hint_transport : rf_transport(), FI_EP_MSG);
	if (h) {
		h->caps = FI_MSG | FI_TAGGED | hint_caps;
		h->mode |= hint_mode;
		h->tx_attr->op_flags = hint_tx_flags;
	}
	return h;
}

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

static int open_fabric_eq(struct side *s)
{
	int ret;
	struct fi_eq_attr ea = {.size = 64, .wait_obj = FI_WAIT_UNSPEC};
	if ((ret = fi_fabric(s->info->fabric_attr, &s->fabric, NULL)))
		return ret;
	return fi_eq_open(s->fabric, &ea, &s->eq, NULL);
}

/* A listening passive endpoint on 127.0.0.1, any port. */
static int srv_open(struct side *s)
{
	struct fi_info *h = msg_hints();
	int ret;
	size_t len = sizeof(s->name);
	memset(s, 0, sizeof(*s));
	ret = fi_getinfo(V, "127.0.0.1", "0", FI_SOURCE, h, &s->info);
	fi_freeinfo(h);
	if (ret)
		return ret;
	if ((ret = open_fabric_eq(s)))
		return ret;
	if ((ret = fi_passive_ep(s->fabric, s->info, &s->pep, NULL)))
		return ret;
	if ((ret = fi_pep_bind(s->pep, &s->eq->fid, 0)))
		return ret;
	if ((ret = fi_listen(s->pep)))
		return ret;
	return fi_getname(&s->pep->fid, &s->name, &len);
}

/* Domain, CQ and endpoint for `info` (client info, or a CONNREQ's), bound
 * to the side's EQ and enabled. */
static int ep_open(struct side *s, struct fi_info *info)
{
	int ret;
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .size = 256, .wait_obj = FI_WAIT_UNSPEC};
	if (!s->domain && (ret = fi_domain(s->fabric, info, &s->domain, NULL)))
		return ret;
	if (!s->cq && (ret = fi_cq_open(s->domain, &ca, &s->cq, NULL)))
		return ret;
	if ((ret = fi_endpoint(s->domain, info, &s->ep, NULL)))
		return ret;
	if ((ret = fi_ep_bind(s->ep, &s->eq->fid, 0)))
		return ret;
	if ((ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV)))
		return ret;
	return fi_enable(s->ep);
}

/* A client side with an enabled (unconnected) endpoint for server `srv`. */
static int cli_open(struct side *c, const struct sockaddr_in *srv)
{
	struct fi_info *h = msg_hints();
	char port[16];
	int ret;
	memset(c, 0, sizeof(*c));
	snprintf(port, sizeof(port), "%u", ntohs(srv->sin_port));
	ret = fi_getinfo(V, "127.0.0.1", port, 0, h, &c->info);
	fi_freeinfo(h);
	if (ret)
		return ret;
	if ((ret = open_fabric_eq(c)))
		return ret;
	return ep_open(c, c->info);
}

/*
 * Reads one event from `eq` (peeking at `other`, which progresses that
 * side). Returns the event's length, -FI_EAVAIL with *err filled for an
 * error event, or -FI_ETIMEDOUT.
 */
static ssize_t get_event(struct fid_eq *eq, struct fid_eq *other, uint32_t *ev, void *buf, size_t len,
			 struct fi_eq_err_entry *err, double timeout)
{
	double end = now_sec() + timeout;
	char scratch[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	uint32_t oev;
	while (now_sec() < end) {
		ssize_t r = fi_eq_read(eq, ev, buf, len, 0);
		if (r >= 0)
			return r;
		if (r == -FI_EAVAIL) {
			struct fi_eq_err_entry tmp;
			if (!err) {
				err = &tmp;
				memset(err, 0, sizeof(*err));
			}
			/* A caller's err_data buffer is kept (fi_eq(3) err_data). */
			return fi_eq_readerr(eq, err, 0) > 0 ? -FI_EAVAIL : -FI_EOTHER;
		}
		if (r != -FI_EAGAIN)
			return r;
		if (other)
			(void)fi_eq_read(other, &oev, scratch, sizeof(scratch), FI_PEEK);
	}
	return -FI_ETIMEDOUT;
}

/* One completion from `cq` (progressing `other`): 1, -FI_EAVAIL (err
 * filled), or 0 on timeout. */
static int get_comp(struct fid_cq *cq, struct fid_eq *other, struct fi_cq_tagged_entry *e,
		    struct fi_cq_err_entry *err, double timeout)
{
	double end = now_sec() + timeout;
	char scratch[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	uint32_t oev;
	while (now_sec() < end) {
		ssize_t r = fi_cq_read(cq, e, 1);
		if (r == 1)
			return 1;
		if (r == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			return fi_cq_readerr(cq, err, 0) == 1 ? -FI_EAVAIL : -FI_EOTHER;
		}
		if (r != -FI_EAGAIN)
			return (int)r;
		if (other)
			(void)fi_eq_read(other, &oev, scratch, sizeof(scratch), FI_PEEK);
	}
	return 0;
}

/* A receive posted after the connection ended is accepted and stays
 * posted: nothing completes it (no data will come, and no error either),
 * until fi_cancel ends it with FI_ECANCELED. 0, or the line that failed. */
static int recv_after_end(struct side *x, void *buf, size_t len)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ce;
	if (fi_recv(x->ep, buf, len, NULL, 0, buf) != 0)
		return __LINE__;
	if (get_comp(x->cq, NULL, &e, &ce, 0.2) != 0)
		return __LINE__;
	if (fi_cancel(&x->ep->fid, buf) != 0)
		return __LINE__;
	if (get_comp(x->cq, NULL, &e, &ce, 5) != -FI_EAVAIL)
		return __LINE__;
	if (ce.err != FI_ECANCELED || ce.op_context != buf || !(ce.flags & FI_RECV))
		return __LINE__;
	if (fi_cq_read(x->cq, &e, 1) != -FI_EAGAIN)
		return __LINE__;
	return 0;
}

/* Connects c to s with connection data of n bytes each way; s gets its
 * endpoint. Checks every event on the way. Returns 0 or a failed line. */
static int pair_connect(struct side *s, struct side *c, size_t n)
{
	char data[CM_MAX], buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)buf;
	uint32_t ev;
	ssize_t r;
	fill(data, n, 1);
	if (fi_connect(c->ep, &s->name, n ? data : NULL, n))
		return __LINE__;
	r = get_event(s->eq, c->eq, &ev, buf, sizeof(buf), NULL, 10);
	if (r != (ssize_t)(sizeof(*cm) + n) || ev != FI_CONNREQ || cm->fid != &s->pep->fid)
		return __LINE__;
	if (!check_fill(cm->data, n, 1))
		return __LINE__;
	struct fi_info *ri = cm->info;
	if (!ri || !ri->handle || ri->handle->fclass != FI_CLASS_CONNREQ || ri->ep_attr->type != FI_EP_MSG)
		return __LINE__;
	if (strcmp(ri->fabric_attr->prov_name, "rustfab") || !ri->dest_addr ||
	    ri->dest_addrlen != sizeof(struct sockaddr_in))
		return __LINE__;
	/* The request's dest_addr is the client endpoint's address. */
	struct sockaddr_in cname;
	size_t len = sizeof(cname);
	if (fi_getname(&c->ep->fid, &cname, &len) || memcmp(&cname, ri->dest_addr, sizeof(cname)))
		return __LINE__;
	if (ep_open(s, ri)) {
		fi_freeinfo(ri);
		return __LINE__;
	}
	fi_freeinfo(ri);
	fill(data, n, 2);
	if (fi_accept(s->ep, n ? data : NULL, n))
		return __LINE__;
	r = get_event(s->eq, c->eq, &ev, buf, sizeof(buf), NULL, 10);
	if (r != (ssize_t)sizeof(*cm) || ev != FI_CONNECTED || cm->fid != &s->ep->fid)
		return __LINE__;
	r = get_event(c->eq, s->eq, &ev, buf, sizeof(buf), NULL, 10);
	if (r != (ssize_t)(sizeof(*cm) + n) || ev != FI_CONNECTED || cm->fid != &c->ep->fid)
		return __LINE__;
	if (!check_fill(cm->data, n, 2))
		return __LINE__;
	return 0;
}

/* Both sides see exactly one FI_SHUTDOWN for their endpoint. */
static int both_shut_down(struct side *a, struct side *b)
{
	char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)buf;
	uint32_t ev;
	struct side *s[2] = {a, b};
	for (int k = 0; k < 2; k++) {
		ssize_t r = get_event(s[k]->eq, s[1 - k]->eq, &ev, buf, sizeof(buf), NULL, 10);
		if (r != (ssize_t)sizeof(*cm) || ev != FI_SHUTDOWN || cm->fid != &s[k]->ep->fid)
			return __LINE__;
	}
	/* No second one, even after the other side's own fi_shutdown. */
	fi_shutdown(a->ep, 0);
	fi_shutdown(b->ep, 0);
	for (int k = 0; k < 2; k++)
		if (get_event(s[k]->eq, s[1 - k]->eq, &ev, buf, sizeof(buf), NULL, 0.2) != -FI_ETIMEDOUT)
			return __LINE__;
	return 0;
}

TEST(getinfo_native_rdm_first)
{
	struct fi_info *info = NULL, *i;
	/* auto, shm and tcp RDM, then auto, shm and tcp MSG (the same caps,
	 * but shm, which refuses a peer on another host, without
	 * FI_REMOTE_COMM; sockaddr addresses on each), then the datagram
	 * entries (docs/dgram.md) */
	const char *names[] = {"auto", "shm", "tcp", "auto", "shm", "tcp", "auto", "shm", "tcp"};
	uint64_t msg_caps = 0;
	int k = 0;
	struct fi_info *h = rf_hints(NULL, FI_EP_UNSPEC);
	CHECK_OK(fi_getinfo(V, NULL, NULL, 0, h, &info));
	fi_freeinfo(h);
	for (i = info; i; i = i->next, k++) {
		CHECK(!strcmp(i->fabric_attr->prov_name, "rustfab"));
		CHECK(k < 9 && i->ep_attr->type == (k < 3 ? FI_EP_RDM : k < 6 ? FI_EP_MSG : FI_EP_DGRAM));
		CHECK(!strcmp(i->domain_attr->name, names[k]));
		if (k >= 3 && k < 6) {
			CHECK_EQ(i->addr_format, FI_SOCKADDR_IN);
			CHECK(i->caps & FI_RMA && i->caps & FI_ATOMIC);
			if (k == 3)
				msg_caps = i->caps;
			CHECK(msg_caps & FI_REMOTE_COMM);
			CHECK(i->caps == (k == 4 ? msg_caps & ~FI_REMOTE_COMM : msg_caps));
		}
	}
	fi_freeinfo(info);
	CHECK_EQ(k, 9);
	/* What `fi_info -p rustfab` prints: native RDM first, no layering. */
	FILE *p = popen("fi_info -p rustfab 2>&1", "r");
	char line[256], head[1024] = "";
	int types = 0, bad = 0, status;
	CHECK(p);
	while (fgets(line, sizeof(line), p)) {
		if (strlen(head) + strlen(line) < sizeof(head))
			strcat(head, line);
		if (strstr(line, "ofi_rxm"))
			bad = 1;
		if (strstr(line, "type:")) {
			const char *w = types < 3 ? "FI_EP_RDM" : types < 6 ? "FI_EP_MSG" : "FI_EP_DGRAM";
			if (!strstr(line, w))
				bad = 1;
			types++;
		}
	}
	status = pclose(p);
	if (types != 9) /* say what fi_info printed (its first lines) */
		fprintf(stderr, "fi_info -p rustfab (status %d) printed:\n%s\n", status, head);
	CHECK_EQ(bad, 0);
	CHECK_EQ(types, 9);
}

TEST(pep_basics)
{
	struct side s;
	struct fi_info *h = msg_hints();
	size_t v = 0, len = sizeof(v);
	memset(&s, 0, sizeof(s));
	CHECK_OK(fi_getinfo(V, "127.0.0.1", "0", FI_SOURCE, h, &s.info));
	fi_freeinfo(h);
	CHECK_EQ(s.info->ep_attr->type, FI_EP_MSG);
	CHECK_OK(open_fabric_eq(&s));
	CHECK_OK(fi_passive_ep(s.fabric, s.info, &s.pep, NULL));
	CHECK_EQ(s.pep->fid.fclass, FI_CLASS_PEP);
	CHECK_OK(fi_getopt(&s.pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &len));
	CHECK_EQ(v, CM_MAX);
	CHECK_EQ(len, sizeof(size_t));
	len = 2;
	CHECK_EQ(fi_getopt(&s.pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &len), -FI_ETOOSMALL);
	CHECK_EQ(fi_listen(s.pep), -FI_ENOEQ);
	CHECK_OK(fi_pep_bind(s.pep, &s.eq->fid, 0));
	CHECK_EQ(fi_close(&s.eq->fid), -FI_EBUSY); /* bound */
	CHECK_OK(fi_listen(s.pep));
	len = sizeof(s.name);
	CHECK_OK(fi_getname(&s.pep->fid, &s.name, &len));
	CHECK_EQ(len, sizeof(struct sockaddr_in));
	CHECK(s.name.sin_port != 0);
	CHECK_EQ(s.name.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	len = 4;
	CHECK_EQ(fi_getname(&s.pep->fid, &s.name, &len), -FI_ETOOSMALL);
	CHECK_EQ(fi_setname(&s.pep->fid, &s.name, sizeof(s.name)), -FI_EOPBADSTATE);
	CHECK_EQ(fi_reject(s.pep, NULL, NULL, 0), -FI_EINVAL);
	side_close(&s);
}

TEST(endpoint_rules)
{
	struct side s, c;
	char b[8] = {0};
	CHECK_OK(srv_open(&s));
	struct fi_info *h = msg_hints();
	char port[16];
	memset(&c, 0, sizeof(c));
	snprintf(port, sizeof(port), "%u", ntohs(s.name.sin_port));
	CHECK_OK(fi_getinfo(V, "127.0.0.1", port, 0, h, &c.info));
	fi_freeinfo(h);
	CHECK(c.info->dest_addr && c.info->dest_addrlen == sizeof(struct sockaddr_in));
	CHECK(!memcmp(c.info->dest_addr, &s.name, sizeof(s.name)));
	CHECK_OK(open_fabric_eq(&c));
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED};
	CHECK_OK(fi_domain(c.fabric, c.info, &c.domain, NULL));
	CHECK_OK(fi_cq_open(c.domain, &ca, &c.cq, NULL));
	CHECK_OK(fi_endpoint(c.domain, c.info, &c.ep, NULL));
	CHECK_OK(fi_ep_bind(c.ep, &c.cq->fid, FI_TRANSMIT | FI_RECV));
	/* No EQ: connection events would have nowhere to go. */
	CHECK_EQ(fi_enable(c.ep), -FI_ENOEQ);
	CHECK_OK(fi_ep_bind(c.ep, &c.eq->fid, 0));
	CHECK_OK(fi_enable(c.ep));
	size_t v = 0, len = sizeof(v);
	CHECK_OK(fi_getopt(&c.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &len));
	CHECK_EQ(v, CM_MAX);
	/* Bound before connecting: getname answers. */
	struct sockaddr_in a;
	len = sizeof(a);
	CHECK_OK(fi_getname(&c.ep->fid, &a, &len));
	CHECK(a.sin_port != 0);
	CHECK_EQ(fi_getpeer(c.ep, &a, &len), -FI_ENOTCONN);
	/* Sends wait for FI_CONNECTED; receives may be posted now. */
	CHECK_EQ(fi_send(c.ep, b, 4, NULL, 0, NULL), -FI_ENOTCONN);
	CHECK_EQ(fi_inject(c.ep, b, 4, 0), -FI_ENOTCONN);
	CHECK_OK(fi_recv(c.ep, b, sizeof(b), NULL, 0, b));
	/* Too much connection data. */
	char big[CM_MAX + 1];
	CHECK_EQ(fi_connect(c.ep, &s.name, big, sizeof(big)), -FI_EINVAL);
	CHECK_EQ(fi_connect(c.ep, NULL, NULL, 0), -FI_EINVAL);
	/* Closing with a receive posted and never connected is fine. */
	side_close(&c);
	side_close(&s);
}

TEST(connect_accept_data_sizes)
{
	size_t sizes[] = {0, 1, 100, CM_MAX};
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct side s, c;
		int line;
		CHECK_OK(srv_open(&s));
		CHECK_OK(cli_open(&c, &s.name));
		if ((line = pair_connect(&s, &c, sizes[k]))) {
			side_close(&c);
			side_close(&s);
			FAIL_AT("size %zu: pair_connect failed at line %d", sizes[k], line);
		}
		/* Names: each side's peer is the other's name. */
		struct sockaddr_in a, b;
		size_t la = sizeof(a), lb = sizeof(b);
		CHECK_OK(fi_getpeer(c.ep, &a, &la));
		CHECK(!memcmp(&a, &s.name, sizeof(a)));
		CHECK_OK(fi_getname(&c.ep->fid, &a, &la));
		CHECK_OK(fi_getpeer(s.ep, &b, &lb));
		CHECK(!memcmp(&a, &b, sizeof(a)));
		CHECK_OK(fi_getname(&s.ep->fid, &b, &lb));
		CHECK(!memcmp(&b, &s.name, sizeof(b)));
		/* Too much data on accept/reject is refused too (on the used pep
		 * and endpoint: no state change). */
		char big[CM_MAX + 1];
		CHECK_EQ(fi_accept(s.ep, big, sizeof(big)), -FI_EINVAL);
		CHECK_EQ(fi_accept(s.ep, NULL, 0), -FI_EOPBADSTATE);
		CHECK_EQ(fi_connect(c.ep, &s.name, NULL, 0), -FI_EOPBADSTATE);
		CHECK_OK(fi_shutdown(c.ep, 0));
		if ((line = both_shut_down(&c, &s))) {
			side_close(&c);
			side_close(&s);
			FAIL_AT("size %zu: shutdown failed at line %d", sizes[k], line);
		}
		side_close(&c);
		side_close(&s);
	}
}

TEST(reject_with_data)
{
	struct side s, c;
	char data[CM_MAX], buf[sizeof(struct fi_eq_cm_entry) + CM_MAX], errbuf[CM_MAX];
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)buf;
	struct fi_eq_err_entry err;
	uint32_t ev;
	CHECK_OK(srv_open(&s));
	CHECK_OK(cli_open(&c, &s.name));
	CHECK_OK(fi_connect(c.ep, &s.name, "hi", 2));
	CHECK_EQ(get_event(s.eq, c.eq, &ev, buf, sizeof(buf), NULL, 10), sizeof(*cm) + 2);
	CHECK_EQ(ev, FI_CONNREQ);
	fid_t handle = cm->info->handle;
	fi_freeinfo(cm->info);
	char big[CM_MAX + 1];
	CHECK_EQ(fi_reject(s.pep, handle, big, sizeof(big)), -FI_EINVAL);
	fill(data, 77, 5);
	CHECK_OK(fi_reject(s.pep, handle, data, 77));
	/* A consumed request cannot be used again (and nothing crashes). */
	CHECK_EQ(fi_reject(s.pep, handle, NULL, 0), -FI_EINVAL);
	memset(&err, 0, sizeof(err));
	err.err_data = errbuf;
	err.err_data_size = sizeof(errbuf);
	CHECK_EQ(get_event(c.eq, s.eq, &ev, buf, sizeof(buf), &err, 10), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ECONNREFUSED);
	CHECK(err.fid == &c.ep->fid);
	CHECK_EQ(err.err_data_size, 77);
	CHECK(check_fill(errbuf, 77, 5));
	/* The endpoint is done: sends fail at once, a receive stays posted
	 * until cancelled, no FI_SHUTDOWN follows. */
	CHECK_EQ(fi_send(c.ep, buf, 8, NULL, 0, NULL), -FI_ENOTCONN);
	CHECK_EQ(recv_after_end(&c, buf, 8), 0);
	CHECK_EQ(get_event(c.eq, s.eq, &ev, buf, sizeof(buf), NULL, 0.2), -FI_ETIMEDOUT);
	side_close(&c);
	/* The pep goes on: the next client is accepted. */
	CHECK_OK(cli_open(&c, &s.name));
	int line = pair_connect(&s, &c, 3);
	if (line)
		FAIL_AT("pair_connect after a reject failed at line %d", line);
	side_close(&c);
	side_close(&s);
}

TEST(connect_to_closed_port)
{
	struct side s, c;
	struct fi_eq_err_entry err = {0};
	char buf[64];
	uint32_t ev;
	struct sockaddr_in dead;
	CHECK_OK(srv_open(&s));
	dead = s.name;
	side_close(&s); /* nothing listens there any more */
	CHECK_OK(cli_open(&c, &dead));
	CHECK_OK(fi_recv(c.ep, buf, sizeof(buf), NULL, 0, buf));
	CHECK_OK(fi_connect(c.ep, &dead, NULL, 0));
	CHECK_EQ(get_event(c.eq, NULL, &ev, buf, sizeof(buf), &err, 10), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ECONNREFUSED);
	CHECK(err.fid == &c.ep->fid);
	/* The receive posted before connecting completes, cancelled. */
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ce;
	CHECK_EQ(get_comp(c.cq, NULL, &e, &ce, 5), -FI_EAVAIL);
	CHECK_EQ(ce.err, FI_ECANCELED);
	CHECK(ce.op_context == buf);
	side_close(&c);
}

/* Receives posted before fi_connect; message and tagged calls (iov, CQ
 * data, inject, rendezvous sizes, truncation) on the connected pair. */
TEST(data_on_a_connected_pair)
{
	struct side s, c;
	static char rbuf[4][1 << 20], sbuf[1 << 20];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ce;
	CHECK_OK(srv_open(&s));
	CHECK_OK(cli_open(&c, &s.name));
	CHECK_OK(fi_recv(c.ep, rbuf[0], 64, NULL, 0, rbuf[0]));
	CHECK_OK(fi_trecv(c.ep, rbuf[1], 1 << 20, NULL, 0, 0x77, 0, rbuf[1]));
	int line = pair_connect(&s, &c, 0);
	if (line)
		FAIL_AT("pair_connect failed at line %d", line);
	/* Server → client: untagged with CQ data, then a tagged 1 MiB one
	 * (rendezvous); the destination address is ignored. */
	fill(sbuf, 64, 11);
	CHECK_OK(fi_senddata(s.ep, sbuf, 64, NULL, 0xabc, 12345, sbuf));
	CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), 1);
	CHECK(e.op_context == sbuf && (e.flags & FI_SEND));
	CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), 1);
	CHECK(e.op_context == rbuf[0]);
	CHECK_EQ(e.len, 64);
	CHECK_EQ(e.data, 0xabc);
	CHECK(e.flags & FI_REMOTE_CQ_DATA);
	CHECK(check_fill(rbuf[0], 64, 11));
	fill(sbuf, 1 << 20, 12);
	CHECK_OK(fi_tsend(s.ep, sbuf, 1 << 20, NULL, 0, 0x77, sbuf));
	CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), 1);
	CHECK(e.op_context == rbuf[1] && (e.flags & FI_TAGGED));
	CHECK_EQ(e.len, 1 << 20);
	CHECK_EQ(e.tag, 0x77);
	CHECK(check_fill(rbuf[1], 1 << 20, 12));
	CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), 1);
	/* Client → server: tags out of posting order, an iov send, inject. */
	CHECK_OK(fi_trecv(s.ep, rbuf[0], 100, NULL, 0, 2, 0, rbuf[0]));
	CHECK_OK(fi_trecv(s.ep, rbuf[1], 100, NULL, 0, 1, 0, rbuf[1]));
	CHECK_OK(fi_recv(s.ep, rbuf[2], 100, NULL, 0, rbuf[2]));
	char one[] = "tag-one", two[] = "tag-two", part1[] = "io", part2[] = "vec";
	struct iovec iov[2] = {{part1, 2}, {part2, 4}};
	CHECK_OK(fi_tinject(c.ep, one, sizeof(one), 0, 1));
	CHECK_OK(fi_tsend(c.ep, two, sizeof(two), NULL, 0, 2, two));
	CHECK_OK(fi_sendv(c.ep, iov, NULL, 2, 0, iov));
	int seen = 0;
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), 1);
		if (e.op_context == rbuf[0]) {
			seen |= 1;
			CHECK(!strcmp(rbuf[0], "tag-two"));
		} else if (e.op_context == rbuf[1]) {
			seen |= 2;
			CHECK(!strcmp(rbuf[1], "tag-one"));
		} else if (e.op_context == rbuf[2]) {
			seen |= 4;
			CHECK(!strcmp(rbuf[2], "iovec"));
		}
	}
	CHECK_EQ(seen, 7);
	for (int k = 0; k < 2; k++) {
		CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), 1);
		CHECK(e.op_context == two || e.op_context == iov);
	}
	/* Truncation: FI_ETRUNC, and the stream stays in step. */
	CHECK_OK(fi_recv(s.ep, rbuf[0], 10, NULL, 0, rbuf[0]));
	CHECK_OK(fi_recv(s.ep, rbuf[1], 100, NULL, 0, rbuf[1]));
	fill(sbuf, 100, 3);
	CHECK_OK(fi_send(c.ep, sbuf, 100, NULL, 0, NULL));
	CHECK_OK(fi_send(c.ep, sbuf, 50, NULL, 0, NULL));
	CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), -FI_EAVAIL);
	CHECK_EQ(ce.err, FI_ETRUNC);
	CHECK_EQ(ce.olen, 90);
	CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), 1);
	CHECK_EQ(e.len, 50);
	CHECK(check_fill(rbuf[1], 50, 3));
	for (int k = 0; k < 2; k++)
		CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), 1);
	CHECK_OK(fi_shutdown(s.ep, 0));
	line = both_shut_down(&s, &c);
	if (line)
		FAIL_AT("shutdown failed at line %d", line);
	side_close(&c);
	side_close(&s);
}

/* fi_write with FI_DELIVERY_COMPLETE: its completion means the bytes are
 * in the target's memory (or the target's refusal is known) on every
 * transport; the default, transmit complete, completes a shm write once it
 * is in the target's ring (docs/rma.md, Completions). */
static ssize_t write_dc(struct fid_ep *ep, const void *buf, size_t len, uint64_t addr, uint64_t key, void *ctx)
{
	struct iovec iov = {(void *)buf, len};
	struct fi_rma_iov rma = {.addr = addr, .len = len, .key = key};
	struct fi_msg_rma m = {.msg_iov = &iov, .iov_count = 1, .rma_iov = &rma, .rma_iov_count = 1, .context = ctx};
	return fi_writemsg(ep, &m, FI_DELIVERY_COMPLETE);
}

/* RMA on a connected pair (the destination address is ignored): writes and
 * reads of 1 MiB and a few bytes with the bytes checked, writedata's remote
 * CQ data at the server, and a bad key / out-of-range access refused
 * (error completion, no memory changed). Over shm too (RF_TRANSPORT). The
 * writes whose bytes or refusals are checked at once ask
 * FI_DELIVERY_COMPLETE (write_dc); the endpoint's default is
 * FI_TRANSMIT_COMPLETE (with no level a tcp write completes once written,
 * docs/rma.md). */
TEST(rma_on_a_connected_pair)
{
	struct side s, c;
	static unsigned char tgt[(1 << 20) + 4096], loc[(1 << 20) + 4096];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ce;
	struct fid_mr *mr;
	hint_caps = FI_RMA;
	hint_tx_flags = FI_TRANSMIT_COMPLETE;
	int r1 = srv_open(&s), r2 = r1 ? r1 : cli_open(&c, &s.name);
	hint_caps = 0;
	hint_tx_flags = 0;
	CHECK_OK(r1);
	CHECK_OK(r2);
	int line = pair_connect(&s, &c, 0);
	if (line)
		FAIL_AT("pair_connect failed at line %d", line);
	CHECK_OK(fi_mr_reg(s.domain, tgt, sizeof(tgt), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0x42, 0, &mr, NULL));
	memset(tgt, 0, sizeof(tgt));
	fill(loc, 1 << 20, 41);
	CHECK_OK(write_dc(c.ep, loc, 1 << 20, 4096, 0x42, loc));
	CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), 1);
	CHECK(e.op_context == loc);
	CHECK_EQ(e.flags, FI_RMA | FI_WRITE);
	CHECK(check_fill(tgt + 4096, 1 << 20, 41));
	memset(loc, 0, sizeof(loc));
	CHECK_OK(fi_read(c.ep, loc, 1 << 20, NULL, 0, 4096, 0x42, loc));
	CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), 1);
	CHECK_EQ(e.flags, FI_RMA | FI_READ);
	CHECK(check_fill(loc, 1 << 20, 41));
	fill(loc, 32, 42);
	CHECK_OK(fi_writedata(c.ep, loc, 32, NULL, 0x5150, 0, 10, 0x42, NULL));
	CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), 1);
	CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), 1);
	CHECK_EQ(e.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	CHECK_EQ(e.data, 0x5150);
	CHECK(check_fill(tgt + 10, 32, 42));
	/* Refused: unknown key, then past the region's end. */
	memset(tgt, 0x5a, sizeof(tgt));
	CHECK_OK(write_dc(c.ep, loc, 64, 0, 0x43, loc));
	CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), -FI_EAVAIL);
	CHECK_EQ(ce.err, FI_EINVAL);
	memset(loc, 0xa5, 128);
	CHECK_OK(fi_read(c.ep, loc, 128, NULL, 0, sizeof(tgt) - 64, 0x42, loc));
	CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), -FI_EAVAIL);
	CHECK_EQ(ce.err, FI_EACCES);
	for (size_t i = 0; i < sizeof(tgt); i++)
		if (tgt[i] != 0x5a)
			FAIL_AT("target byte %zu changed", i);
	for (size_t i = 0; i < 128; i++)
		if (loc[i] != 0xa5)
			FAIL_AT("initiator byte %zu changed", i);
	CHECK_OK(fi_shutdown(s.ep, 0));
	line = both_shut_down(&s, &c);
	if (line)
		FAIL_AT("shutdown failed at line %d", line);
	fi_close(&mr->fid);
	side_close(&c);
	side_close(&s);
}

/*
 * What the client sent before its fi_shutdown reaches the server before the
 * server's FI_SHUTDOWN: 300 messages of 4000 bytes (more than a shm ring
 * holds, so the client waits for the server on the way), every send
 * completed, then the client shuts down; the server, which posted all the
 * receives, hears FI_SHUTDOWN and then finds every one of them complete,
 * in order and intact (over shm the end comes over TCP and the data
 * through the ring: it is drained first).
 */
TEST(data_sent_before_shutdown_arrives_first)
{
	enum { N = 300, LEN = 4000 };
	struct side s, c;
	static char rbuf[N][LEN], sbuf[N][LEN];
	char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ce;
	uint32_t ev, oev;
	CHECK_OK(srv_open(&s));
	CHECK_OK(cli_open(&c, &s.name));
	int line = pair_connect(&s, &c, 0);
	if (line)
		FAIL_AT("pair_connect failed at line %d", line);
	for (int k = 0; k < N; k++)
		CHECK_OK(fi_recv(s.ep, rbuf[k], LEN, NULL, 0, rbuf[k]));
	int done = 0;
	double end = now_sec() + 30 * rf_time_scale();
	for (int k = 0; k < N; k++) {
		fill(sbuf[k], LEN, (unsigned char)(k + 1));
		ssize_t r;
		while ((r = fi_send(c.ep, sbuf[k], LEN, NULL, 0, sbuf[k])) == -FI_EAGAIN) {
			CHECK(now_sec() < end);
			/* Progress both: the server's ring drains, our completions come. */
			(void)fi_eq_read(s.eq, &oev, buf, sizeof(buf), FI_PEEK);
			while (fi_cq_read(c.cq, &e, 1) == 1)
				done++;
		}
		CHECK_OK(r);
	}
	while (done < N) {
		CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), 1);
		done++;
	}
	CHECK_OK(fi_shutdown(c.ep, 0));
	ssize_t r = get_event(s.eq, NULL, &ev, buf, sizeof(buf), NULL, 10 * rf_time_scale());
	CHECK_EQ(r, (ssize_t)sizeof(struct fi_eq_cm_entry));
	CHECK_EQ(ev, FI_SHUTDOWN);
	for (int k = 0; k < N; k++) {
		int got = get_comp(s.cq, NULL, &e, &ce, 10);
		if (got != 1)
			FAIL_AT("receive %d: %d (err %d)", k, got, got == -FI_EAVAIL ? ce.err : 0);
		CHECK(e.op_context == rbuf[k]);
		CHECK_EQ(e.len, LEN);
		if (!check_fill(rbuf[k], LEN, (unsigned char)(k + 1)))
			FAIL_AT("message %d garbled", k);
	}
	side_close(&c);
	side_close(&s);
}

/*
 * A client on RF_TRANSPORT against a server on tcp (which offers no shared
 * memory): shm refuses the connection at the client (FI_ECONNREFUSED; the
 * server, which accepted, sees FI_CONNECTED then FI_SHUTDOWN); auto and tcp
 * connect and move data over TCP.
 */
TEST(client_against_a_tcp_server)
{
	struct side s, c;
	char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX], rbuf[64];
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)buf;
	struct fi_eq_err_entry err;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ce;
	uint32_t ev;
	int shm = !strcmp(rf_transport(), "shm");
	hint_transport = "tcp";
	int r1 = srv_open(&s);
	hint_transport = NULL;
	CHECK_OK(r1);
	CHECK_OK(cli_open(&c, &s.name));
	CHECK_OK(fi_connect(c.ep, &s.name, NULL, 0));
	ssize_t r = get_event(s.eq, c.eq, &ev, buf, sizeof(buf), NULL, 10);
	CHECK_EQ(r, (ssize_t)sizeof(*cm));
	CHECK_EQ(ev, FI_CONNREQ);
	struct fi_info *ri = cm->info;
	CHECK_OK(ep_open(&s, ri));
	fi_freeinfo(ri);
	CHECK_OK(fi_accept(s.ep, NULL, 0));
	r = get_event(s.eq, c.eq, &ev, buf, sizeof(buf), NULL, 10);
	CHECK_EQ(ev, FI_CONNECTED);
	memset(&err, 0, sizeof(err));
	r = get_event(c.eq, s.eq, &ev, buf, sizeof(buf), &err, 10);
	if (shm) {
		CHECK_EQ(r, -FI_EAVAIL);
		CHECK_EQ(err.err, FI_ECONNREFUSED);
		CHECK_EQ(get_event(s.eq, c.eq, &ev, buf, sizeof(buf), NULL, 10), (ssize_t)sizeof(*cm));
		CHECK_EQ(ev, FI_SHUTDOWN);
		CHECK_EQ(fi_send(c.ep, "x", 1, NULL, 0, NULL), -FI_ENOTCONN);
	} else {
		CHECK_EQ(r, (ssize_t)sizeof(*cm));
		CHECK_EQ(ev, FI_CONNECTED);
		CHECK_OK(fi_recv(s.ep, rbuf, sizeof(rbuf), NULL, 0, rbuf));
		CHECK_OK(fi_send(c.ep, "over tcp", 9, NULL, 0, NULL));
		CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), 1);
		CHECK(!strcmp(rbuf, "over tcp"));
		CHECK_OK(fi_shutdown(c.ep, 0));
		int line = both_shut_down(&s, &c);
		if (line)
			FAIL_AT("shutdown failed at line %d", line);
	}
	side_close(&c);
	side_close(&s);
}

/*
 * Buffered receives (FI_BUFFERED_RECV) on a connected endpoint, as on RDM
 * ones (test_buffered.c): a small message reported in place and discarded,
 * a large one reported with FI_MORE and its first FI_OPT_BUFFERED_MIN bytes
 * (pushed behind the RTS: the handshake told the client how many), then
 * claimed into an iov; the client's sends complete.
 */
TEST(buffered_receives_on_a_connected_pair)
{
	struct side s, c;
	static char sbuf[1 << 20], rbuf[(1 << 20) + 16];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ce;
	size_t min = 0, optlen = sizeof(min);
	hint_mode = FI_BUFFERED_RECV;
	int r = srv_open(&s);
	hint_mode = 0;
	CHECK_OK(r);
	CHECK(s.info->mode & FI_BUFFERED_RECV);
	CHECK_OK(cli_open(&c, &s.name));
	int line = pair_connect(&s, &c, 0);
	if (line)
		FAIL_AT("pair_connect failed at line %d", line);
	CHECK_OK(fi_getopt(&s.ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_MIN, &min, &optlen));
	CHECK(min > 0 && min < (1 << 20));
	/* The client has no buffered receives: the option is not there. */
	CHECK_EQ(fi_getopt(&c.ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_MIN, &min, &optlen), -FI_ENOPROTOOPT);
	char hello[] = "in place";
	fill(sbuf, sizeof(sbuf), 21);
	CHECK_OK(fi_send(c.ep, hello, sizeof(hello), NULL, 0, hello));
	CHECK_OK(fi_tsend(c.ep, sbuf, sizeof(sbuf), NULL, 0, 0x55, sbuf));
	CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), 1);
	struct fi_recv_context *rc = e.op_context;
	CHECK(rc && rc->ep == s.ep && !(e.flags & FI_MORE) && (e.flags & FI_RECV));
	CHECK_EQ(e.len, sizeof(hello));
	CHECK(e.buf && !strcmp(e.buf, hello));
	struct fi_msg m = {.context = rc};
	CHECK_OK(fi_recvmsg(s.ep, &m, FI_DISCARD));
	CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), 1);
	rc = e.op_context;
	CHECK(rc && rc->ep == s.ep);
	CHECK((e.flags & (FI_MORE | FI_TAGGED)) == (FI_MORE | FI_TAGGED));
	CHECK_EQ(e.len, sizeof(sbuf));
	CHECK_EQ(e.tag, 0x55);
	CHECK(check_fill(e.buf, min, 21));
	rc->context = rbuf;
	struct iovec iov[2] = {{rbuf, 1000}, {rbuf + 1000, sizeof(rbuf) - 1000}};
	struct fi_msg_tagged tm = {.msg_iov = iov, .iov_count = 2, .context = rc};
	CHECK_OK(fi_trecvmsg(s.ep, &tm, FI_CLAIM));
	CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), 1);
	CHECK(e.op_context == rbuf && (e.flags & FI_CLAIM));
	CHECK_EQ(e.len, sizeof(sbuf));
	CHECK(check_fill(rbuf, sizeof(sbuf), 21));
	for (int k = 0; k < 2; k++) {
		CHECK_EQ(get_comp(c.cq, s.eq, &e, &ce, 10), 1);
		CHECK(e.op_context == hello || e.op_context == sbuf);
	}
	CHECK_OK(fi_shutdown(s.ep, 0));
	line = both_shut_down(&s, &c);
	if (line)
		FAIL_AT("shutdown failed at line %d", line);
	side_close(&c);
	side_close(&s);
}

/* FI_MSG_PREFIX on a connected pair: the server's endpoint is opened with
 * the FI_CONNREQ's info, which carries the pep's mode and prefix size; each
 * side's buffers begin with the prefix, which is neither sent nor written,
 * and receive completions count it (test_prefix.c has the RDM cases). */
TEST(prefix_on_a_connected_pair)
{
	struct side s, c;
	static unsigned char sbuf[64 + 5000], rbuf[64 + 6000];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ce;
	hint_mode = FI_MSG_PREFIX;
	int r = srv_open(&s);
	if (!r)
		r = cli_open(&c, &s.name);
	hint_mode = 0;
	CHECK_OK(r);
	size_t p = c.info->ep_attr->msg_prefix_size;
	CHECK((s.info->rx_attr->mode & FI_MSG_PREFIX) && (c.info->tx_attr->mode & FI_MSG_PREFIX));
	CHECK(p > 0 && p <= 64 && p == s.info->ep_attr->msg_prefix_size);
	int line = pair_connect(&s, &c, 0);
	if (line)
		FAIL_AT("pair_connect failed at line %d", line);
	for (int dir = 0; dir < 2; dir++) {
		struct side *from = dir ? &s : &c, *to = dir ? &c : &s;
		memset(sbuf, 0xa5, p);
		fill(sbuf + p, 5000, 30 + dir);
		memset(rbuf, 0x5a, p);
		memset(rbuf + p, 0xee, sizeof(rbuf) - p);
		if (dir) {
			CHECK_OK(fi_trecv(to->ep, rbuf, sizeof(rbuf), NULL, 0, 9, 0, rbuf));
			CHECK_OK(fi_tsend(from->ep, sbuf, p + 5000, NULL, 0, 9, sbuf));
		} else {
			CHECK_OK(fi_recv(to->ep, rbuf, sizeof(rbuf), NULL, 0, rbuf));
			CHECK_OK(fi_send(from->ep, sbuf, p + 5000, NULL, 0, sbuf));
		}
		CHECK_EQ(get_comp(to->cq, from->eq, &e, &ce, 10), 1);
		CHECK(e.op_context == rbuf);
		CHECK_EQ(e.len, p + 5000);
		CHECK(all_bytes(rbuf, p, 0x5a) && check_fill(rbuf + p, 5000, 30 + dir));
		CHECK(all_bytes(rbuf + p + 5000, sizeof(rbuf) - p - 5000, 0xee));
		CHECK_EQ(get_comp(from->cq, to->eq, &e, &ce, 10), 1);
		CHECK(e.op_context == sbuf);
	}
	CHECK_EQ(fi_send(c.ep, sbuf, p - 1, NULL, 0, sbuf), -FI_EINVAL);
	CHECK_OK(fi_shutdown(s.ep, 0));
	line = both_shut_down(&s, &c);
	if (line)
		FAIL_AT("shutdown failed at line %d", line);
	side_close(&c);
	side_close(&s);
}

/* fi_shutdown cancels outstanding operations before it returns; the peer's
 * ones end with FI_ECONNRESET; later sends fail at once on both sides, and
 * later receives stay posted until cancelled. */
TEST(shutdown_cancels_outstanding)
{
	struct side s, c;
	static char rb[8][64], big[256 << 10];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ce;
	CHECK_OK(srv_open(&s));
	CHECK_OK(cli_open(&c, &s.name));
	int line = pair_connect(&s, &c, 0);
	if (line)
		FAIL_AT("pair_connect failed at line %d", line);
	for (int k = 0; k < 4; k++) {
		CHECK_OK(fi_recv(c.ep, rb[k], 64, NULL, 0, rb[k]));
		CHECK_OK(fi_recv(s.ep, rb[4 + k], 64, NULL, 0, rb[4 + k]));
	}
	/* A rendezvous send the server never takes: waits on the client. */
	CHECK_OK(fi_send(c.ep, big, sizeof(big), NULL, 0, big));
	CHECK_OK(fi_shutdown(c.ep, 0));
	/* Written before fi_shutdown returned: read without progress. */
	int canceled = 0, other = 0;
	for (int k = 0; k < 5; k++) {
		ssize_t r = fi_cq_read(c.cq, &e, 1);
		memset(&ce, 0, sizeof(ce));
		if (r == -FI_EAVAIL && fi_cq_readerr(c.cq, &ce, 0) == 1 && ce.err == FI_ECANCELED)
			canceled++;
		else
			other++;
	}
	CHECK_EQ(canceled, 5);
	CHECK_EQ(other, 0);
	/* The server's posted receives end with FI_ECONNRESET. */
	for (int k = 0; k < 4; k++) {
		CHECK_EQ(get_comp(s.cq, c.eq, &e, &ce, 10), -FI_EAVAIL);
		CHECK_EQ(ce.err, FI_ECONNRESET);
	}
	line = both_shut_down(&c, &s);
	if (line)
		FAIL_AT("shutdown events failed at line %d", line);
	CHECK_EQ(fi_send(c.ep, big, 8, NULL, 0, NULL), -FI_ENOTCONN);
	CHECK_EQ(recv_after_end(&c, big, 8), 0);
	CHECK_EQ(fi_tsend(s.ep, big, 8, NULL, 0, 1, NULL), -FI_ENOTCONN);
	CHECK_EQ(recv_after_end(&s, big, 8), 0);
	side_close(&c);
	side_close(&s);
}

/* fi_msg_sockets' flow: an active endpoint takes a passive endpoint's
 * address (info->handle = the pep); fi_getname stays that address. */
TEST(endpoint_on_a_pep_address)
{
	struct side s, c;
	struct sockaddr_in want = {.sin_family = AF_INET}, a;
	size_t len = sizeof(a);
	CHECK_OK(srv_open(&s));
	struct fi_info *h = msg_hints();
	memset(&c, 0, sizeof(c));
	CHECK_OK(fi_getinfo(V, "127.0.0.1", NULL, FI_SOURCE, h, &c.info));
	CHECK_OK(open_fabric_eq(&c));
	CHECK_OK(fi_passive_ep(c.fabric, c.info, &c.pep, NULL));
	want.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_OK(fi_setname(&c.pep->fid, &want, sizeof(want)));
	CHECK_OK(fi_getname(&c.pep->fid, &want, &len));
	CHECK(want.sin_port != 0);
	fi_freeinfo(c.info);
	c.info = NULL;
	char port[16];
	snprintf(port, sizeof(port), "%u", ntohs(s.name.sin_port));
	h->handle = &c.pep->fid;
	CHECK_OK(fi_getinfo(V, "127.0.0.1", port, 0, h, &c.info));
	fi_freeinfo(h);
	CHECK(c.info->handle == &c.pep->fid);
	CHECK_OK(ep_open(&c, c.info));
	fi_close(&c.pep->fid);
	c.pep = NULL;
	len = sizeof(a);
	CHECK_OK(fi_getname(&c.ep->fid, &a, &len));
	CHECK(!memcmp(&a, &want, sizeof(a)));
	int line = pair_connect(&s, &c, 0);
	if (line)
		FAIL_AT("pair_connect failed at line %d", line);
	len = sizeof(a);
	CHECK_OK(fi_getname(&c.ep->fid, &a, &len));
	CHECK(!memcmp(&a, &want, sizeof(a)));
	side_close(&c);
	side_close(&s);
}

/* Hostile clients (silent, garbage, an RDM handshake) cost only their own
 * connection: a real client is served meanwhile, nothing reaches the EQ. */
TEST(hostile_clients)
{
	struct side s, c;
	int fds[3];
	char junk[64];
	memset(junk, 0xee, sizeof(junk));
	CHECK_OK(srv_open(&s));
	for (int k = 0; k < 3; k++) {
		fds[k] = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(fds[k] >= 0);
		CHECK_OK(connect(fds[k], (struct sockaddr *)&s.name, sizeof(s.name)));
	}
	CHECK_EQ(write(fds[1], junk, sizeof(junk)), (ssize_t)sizeof(junk));
	CHECK_EQ(write(fds[2], junk, 10), 10);
	CHECK_OK(cli_open(&c, &s.name));
	int line = pair_connect(&s, &c, 5);
	if (line)
		FAIL_AT("pair_connect failed at line %d", line);
	/* The garbage sender was cut off: its socket reads EOF. */
	char b;
	double end = now_sec() + 5;
	ssize_t r = -1;
	struct pollfd pfd = {.fd = fds[1], .events = POLLIN};
	while (now_sec() < end) {
		uint32_t ev;
		char buf[64];
		(void)fi_eq_read(s.eq, &ev, buf, sizeof(buf), FI_PEEK);
		if (poll(&pfd, 1, 10) == 1) {
			r = read(fds[1], &b, 1);
			break;
		}
	}
	CHECK_EQ(r, 0);
	for (int k = 0; k < 3; k++)
		close(fds[k]);
	side_close(&c);
	side_close(&s);
}

/* A flood of sockets that connect and say nothing fills the listener's
 * handshake slots (256); a real client connecting during it still gets its
 * FI_CONNREQ at once (the oldest silent socket makes room) rather than after
 * the 10 s handshake deadline (docs/reliability.md F16). */
TEST(silent_flood_does_not_lock_out_a_client)
{
	enum { FLOOD = 300 };
	struct side s, c;
	static int fds[FLOOD];
	/* Both ends of the flood live in this process: make room for them. */
	struct rlimit rl;
	CHECK_OK(getrlimit(RLIMIT_NOFILE, &rl));
	if (rl.rlim_cur < 2048) {
		rl.rlim_cur = rl.rlim_max < 2048 ? rl.rlim_max : 2048;
		CHECK_OK(setrlimit(RLIMIT_NOFILE, &rl));
	}
	CHECK(rl.rlim_cur >= 2 * FLOOD + 64);
	CHECK_OK(srv_open(&s));
	for (int k = 0; k < FLOOD; k++) {
		fds[k] = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(fds[k] >= 0);
		CHECK_OK(connect(fds[k], (struct sockaddr *)&s.name, sizeof(s.name)));
	}
	/* Let the listener accept them all. */
	double end = now_sec() + 0.3;
	while (now_sec() < end) {
		uint32_t ev;
		char buf[64];
		(void)fi_eq_read(s.eq, &ev, buf, sizeof(buf), FI_PEEK);
	}
	CHECK_OK(cli_open(&c, &s.name));
	double start = now_sec();
	int line = pair_connect(&s, &c, 3);
	if (line)
		FAIL_AT("pair_connect failed at line %d", line);
	CHECK(now_sec() - start < 5);
	for (int k = 0; k < FLOOD; k++)
		close(fds[k]);
	side_close(&c);
	side_close(&s);
}

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* A connection request the application never reads: closing the EQ that
 * holds it closes its connection (the client is refused) and frees its
 * info; every descriptor is released. */
TEST(unread_connreq_is_refused_and_freed)
{
	struct side s, c;
	struct fi_eq_err_entry err = {0};
	char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	uint32_t ev;
	int before = count_fds();
	CHECK_OK(srv_open(&s));
	CHECK_OK(cli_open(&c, &s.name));
	CHECK_OK(fi_connect(c.ep, &s.name, "q", 1));
	/* Let the request reach the server's EQ, without reading it. */
	double end = now_sec() + 10;
	ssize_t r = -FI_EAGAIN;
	while (now_sec() < end && r == -FI_EAGAIN) {
		(void)fi_eq_read(c.eq, &ev, buf, sizeof(buf), FI_PEEK);
		r = fi_eq_read(s.eq, &ev, buf, sizeof(buf), FI_PEEK);
	}
	CHECK_EQ(r, sizeof(struct fi_eq_cm_entry) + 1);
	CHECK_EQ(ev, FI_CONNREQ);
	side_close(&s);
	CHECK_EQ(get_event(c.eq, NULL, &ev, buf, sizeof(buf), &err, 10), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ECONNREFUSED);
	side_close(&c);
	CHECK_EQ(count_fds(), before);
}

/*
 * A connection request's handle lives until it is consumed, however many
 * requests come and go meanwhile; a consumed one is refused (-FI_EINVAL)
 * however late it comes back, without a read of it (issue 12 finding 7:
 * before, consumed handles were freed 256 consumptions later and a later
 * use read freed memory, which make memcheck reports).
 */
TEST(connreq_handles_live_until_consumed)
{
	struct side s, c1, c;
	char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)buf;
	struct fi_eq_err_entry err;
	uint32_t ev;
	CHECK_OK(srv_open(&s));
	CHECK_OK(cli_open(&c1, &s.name));
	CHECK_OK(fi_connect(c1.ep, &s.name, NULL, 0));
	CHECK_EQ(get_event(s.eq, c1.eq, &ev, buf, sizeof(buf), NULL, 10), sizeof(*cm));
	CHECK_EQ(ev, FI_CONNREQ);
	struct fi_info *held = cm->info;
	/* 300 more requests, each rejected (consumed), from one client domain. */
	CHECK_OK(cli_open(&c, &s.name));
	fid_t first_rejected = NULL;
	for (int k = 0; k < 300; k++) {
		if (k > 0) {
			fi_close(&c.ep->fid);
			c.ep = NULL;
			CHECK_OK(ep_open(&c, c.info));
		}
		CHECK_OK(fi_connect(c.ep, &s.name, NULL, 0));
		CHECK_EQ(get_event(s.eq, c.eq, &ev, buf, sizeof(buf), NULL, 10), sizeof(*cm));
		CHECK_EQ(ev, FI_CONNREQ);
		fid_t h = cm->info->handle;
		fi_freeinfo(cm->info);
		CHECK_OK(fi_reject(s.pep, h, NULL, 0));
		if (!first_rejected)
			first_rejected = h;
		memset(&err, 0, sizeof(err));
		CHECK_EQ(get_event(c.eq, s.eq, &ev, buf, sizeof(buf), &err, 10), -FI_EAVAIL);
		CHECK_EQ(err.err, FI_ECONNREFUSED);
	}
	/* Long consumed: refused, unread. */
	CHECK_EQ(fi_reject(s.pep, first_rejected, NULL, 0), -FI_EINVAL);
	/* The held one still takes its connection. */
	CHECK_OK(ep_open(&s, held));
	fi_freeinfo(held);
	CHECK_OK(fi_accept(s.ep, NULL, 0));
	CHECK_EQ(get_event(s.eq, c1.eq, &ev, buf, sizeof(buf), NULL, 10), sizeof(*cm));
	CHECK_EQ(ev, FI_CONNECTED);
	CHECK_EQ(get_event(c1.eq, s.eq, &ev, buf, sizeof(buf), NULL, 10), sizeof(*cm));
	CHECK_EQ(ev, FI_CONNECTED);
	side_close(&c);
	side_close(&c1);
	side_close(&s);
}

/*
 * A request read but never consumed (its info freed with fi_freeinfo,
 * which does not reach the provider) is consumed when its passive endpoint
 * closes: the client is refused at once and the handle is freed. Before,
 * it stayed open (the client waited for ever) and leaked.
 */
TEST(pep_close_consumes_its_unconsumed_requests)
{
	struct side s, c;
	char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)buf;
	struct fi_eq_err_entry err = {0};
	uint32_t ev;
	CHECK_OK(srv_open(&s));
	CHECK_OK(cli_open(&c, &s.name));
	CHECK_OK(fi_connect(c.ep, &s.name, NULL, 0));
	CHECK_EQ(get_event(s.eq, c.eq, &ev, buf, sizeof(buf), NULL, 10), sizeof(*cm));
	CHECK_EQ(ev, FI_CONNREQ);
	fi_freeinfo(cm->info);
	side_close(&s);
	CHECK_EQ(get_event(c.eq, NULL, &ev, buf, sizeof(buf), &err, 10), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ECONNREFUSED);
	side_close(&c);
}

/* One passive endpoint and EQ serve many connections in turn (a domain
 * per connection, as fabtests do): descriptors do not build up. */
TEST(many_connections_one_eq)
{
	struct side s, c;
	CHECK_OK(srv_open(&s));
	int base = -1;
	for (int k = 0; k < 40; k++) {
		CHECK_OK(cli_open(&c, &s.name));
		int line = pair_connect(&s, &c, (size_t)k);
		if (line)
			FAIL_AT("connection %d failed at line %d", k, line);
		CHECK_OK(fi_shutdown(s.ep, 0));
		line = both_shut_down(&s, &c);
		if (line)
			FAIL_AT("connection %d: shutdown failed at line %d", k, line);
		side_close(&c);
		fi_close(&s.ep->fid);
		fi_close(&s.cq->fid);
		fi_close(&s.domain->fid);
		s.ep = NULL;
		s.cq = NULL;
		s.domain = NULL;
		if (k == 4)
			base = count_fds();
	}
	CHECK_EQ(count_fds(), base);
	side_close(&s);
}

/*
 * The blocking path across processes: the parent sleeps in fi_eq_sread
 * until a child (started later) connects; the child sleeps in fi_eq_sread
 * for FI_CONNECTED and then for FI_SHUTDOWN.
 */
TEST(sread_wakes_across_processes)
{
	struct side s;
	char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)buf;
	uint32_t ev;
	CHECK_OK(srv_open(&s));
	fflush(stdout);
	pid_t pid = rf_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct side c;
		usleep(300 * 1000);
		if (cli_open(&c, &s.name) || fi_connect(c.ep, &s.name, "x", 1))
			_exit(2);
		if (fi_eq_sread(c.eq, &ev, buf, sizeof(buf), 10000, 0) != (ssize_t)sizeof(*cm) + 1 ||
		    ev != FI_CONNECTED || buf[sizeof(*cm)] != 'y')
			_exit(3);
		if (fi_eq_sread(c.eq, &ev, buf, sizeof(buf), 10000, 0) != (ssize_t)sizeof(*cm) || ev != FI_SHUTDOWN)
			_exit(4);
		side_close(&c);
		_exit(0);
	}
	double t0 = now_sec();
	ssize_t r = fi_eq_sread(s.eq, &ev, buf, sizeof(buf), 10000, 0);
	double slept = now_sec() - t0;
	CHECK_EQ(r, sizeof(*cm) + 1);
	CHECK_EQ(ev, FI_CONNREQ);
	CHECK(slept > 0.2);
	struct fi_info *ri = cm->info;
	CHECK_OK(ep_open(&s, ri));
	fi_freeinfo(ri);
	CHECK_OK(fi_accept(s.ep, "y", 1));
	CHECK_EQ(fi_eq_sread(s.eq, &ev, buf, sizeof(buf), 10000, 0), sizeof(*cm));
	CHECK_EQ(ev, FI_CONNECTED);
	CHECK_OK(fi_shutdown(s.ep, 0));
	CHECK_EQ(fi_eq_sread(s.eq, &ev, buf, sizeof(buf), 10000, 0), sizeof(*cm));
	CHECK_EQ(ev, FI_SHUTDOWN);
	int st = 0;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	side_close(&s);
}

/*
 * docs/reliability.md F3: 32 sends and 32 receives outstanding, then the peer is
 * killed with SIGKILL: FI_SHUTDOWN within 5 s, all 64 operations end in
 * error, new sends fail at once and new receives stay posted until cancelled.
 */
TEST(peer_killed)
{
	struct side s;
	char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)buf;
	static char rb[32][64], big[32][128 << 10];
	uint32_t ev;
	int ready[2];
	CHECK_OK(srv_open(&s));
	CHECK_OK(pipe(ready));
	fflush(stdout);
	pid_t pid = rf_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct side c;
		if (cli_open(&c, &s.name) || fi_connect(c.ep, &s.name, NULL, 0))
			_exit(2);
		if (fi_eq_sread(c.eq, &ev, buf, sizeof(buf), 10000, 0) != (ssize_t)sizeof(*cm) || ev != FI_CONNECTED)
			_exit(3);
		if (write(ready[1], "r", 1) != 1)
			_exit(4);
		for (;;)
			pause(); /* never progresses again */
	}
	CHECK_EQ(fi_eq_sread(s.eq, &ev, buf, sizeof(buf), 10000, 0), sizeof(*cm));
	CHECK_EQ(ev, FI_CONNREQ);
	struct fi_info *ri = cm->info;
	CHECK_OK(ep_open(&s, ri));
	fi_freeinfo(ri);
	CHECK_OK(fi_accept(s.ep, NULL, 0));
	CHECK_EQ(fi_eq_sread(s.eq, &ev, buf, sizeof(buf), 10000, 0), sizeof(*cm));
	CHECK_EQ(ev, FI_CONNECTED);
	char c1;
	CHECK_EQ(read(ready[0], &c1, 1), 1);
	for (int k = 0; k < 32; k++) {
		CHECK_OK(fi_recv(s.ep, rb[k], 64, NULL, 0, rb[k]));
		CHECK_OK(fi_send(s.ep, big[k], sizeof(big[k]), NULL, 0, big[k]));
	}
	struct fi_cq_tagged_entry e;
	CHECK_EQ(fi_cq_read(s.cq, &e, 1), -FI_EAGAIN);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	double t0 = now_sec();
	CHECK_EQ(fi_eq_sread(s.eq, &ev, buf, sizeof(buf), 5000, 0), sizeof(*cm));
	CHECK_EQ(ev, FI_SHUTDOWN);
	CHECK(cm->fid == &s.ep->fid);
	CHECK(now_sec() - t0 < 5);
	int errs = 0;
	struct fi_cq_err_entry ce;
	for (int k = 0; k < 64; k++) {
		if (get_comp(s.cq, NULL, &e, &ce, 5) != -FI_EAVAIL)
			break;
		CHECK(ce.err == FI_ECONNRESET || ce.err == FI_ECANCELED);
		errs++;
	}
	CHECK_EQ(errs, 64);
	CHECK_EQ(fi_cq_read(s.cq, &e, 1), -FI_EAGAIN);
	t0 = now_sec();
	CHECK_EQ(fi_send(s.ep, big[0], 8, NULL, 0, NULL), -FI_ENOTCONN);
	CHECK(now_sec() - t0 < 0.05);
	CHECK_EQ(recv_after_end(&s, rb[0], 8), 0);
	close(ready[0]);
	close(ready[1]);
	side_close(&s);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	RUN(getinfo_native_rdm_first);
	RUN(pep_basics);
	RUN(endpoint_rules);
	RUN(connect_accept_data_sizes);
	RUN(reject_with_data);
	RUN(connect_to_closed_port);
	RUN(data_on_a_connected_pair);
	RUN(rma_on_a_connected_pair);
	RUN(buffered_receives_on_a_connected_pair);
	RUN(prefix_on_a_connected_pair);
	RUN(data_sent_before_shutdown_arrives_first);
	RUN(client_against_a_tcp_server);
	RUN(shutdown_cancels_outstanding);
	RUN(endpoint_on_a_pep_address);
	RUN(hostile_clients);
	RUN(silent_flood_does_not_lock_out_a_client);
	RUN(unread_connreq_is_refused_and_freed);
	RUN(connreq_handles_live_until_consumed);
	RUN(pep_close_consumes_its_unconsumed_requests);
	RUN(many_connections_one_eq);
	RUN(sread_wakes_across_processes);
	RUN(peer_killed);
	return harness_done();
}
