/* fi_getinfo through the public API: both transports in order, hint matching
 * and refusal (-FI_ENODATA), node/service/FI_SOURCE resolution for shm and
 * tcp (IPv4 and IPv6), core-filled prov_name, fi_dupinfo/fi_freeinfo of the
 * results, and results that fi_fabric/fi_domain accept. */
#include "harness.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <rdma/fi_ext_rustfab.h> /* this tree's include/, not an installed copy */

#define V FI_VERSION(1, 17)
#define SHM_PREFIX FI_RUSTFAB_SHM_ADDR_PREFIX
#define SHM_ADDR_LEN FI_RUSTFAB_SHM_ADDR_LEN /* prefix + 16 hex digits + NUL */

static int n_entries(const struct fi_info *i)
{
	int n = 0;
	for (; i; i = i->next)
		n++;
	return n;
}

/* rf_hints() plus fi_getinfo; hints are freed. */
static int rf_get(struct fi_info *h, const char *node, const char *service, uint64_t flags, struct fi_info **out)
{
	int ret = fi_getinfo(V, node, service, flags, h, out);
	fi_freeinfo(h);
	return ret;
}

static int is_shm_addr(const void *addr, size_t len)
{
	return addr && len == SHM_ADDR_LEN && !strncmp(addr, SHM_PREFIX, strlen(SHM_PREFIX)) &&
	       ((const char *)addr)[len - 1] == '\0';
}

static int is_sin(const void *addr, size_t len, const char *ip, int port)
{
	const struct sockaddr_in *s = addr;
	struct in_addr want;
	if (!addr || len != sizeof(*s) || s->sin_family != AF_INET)
		return 0;
	if (port >= 0 && ntohs(s->sin_port) != port)
		return 0;
	if (!ip)
		return 1;
	inet_pton(AF_INET, ip, &want);
	return s->sin_addr.s_addr == want.s_addr;
}

static int is_sin6(const void *addr, size_t len, const char *ip, int port)
{
	const struct sockaddr_in6 *s = addr;
	struct in6_addr want;
	if (!addr || len != sizeof(*s) || s->sin6_family != AF_INET6)
		return 0;
	if (port >= 0 && ntohs(s->sin6_port) != port)
		return 0;
	if (!ip)
		return 1;
	inet_pton(AF_INET6, ip, &want);
	return !memcmp(&s->sin6_addr, &want, sizeof(want));
}

static const char *dom(const struct fi_info *i)
{
	return i->domain_attr->name;
}

/* Native RDM entries first (shm, tcp), then the connected endpoints (shm,
 * tcp: set up over TCP on both, sockaddr addresses), then the datagram ones
 * (shm rings, UDP). */
TEST(null_hints_shm_then_tcp)
{
	struct fi_info *info = NULL, *i;
	const char *want[] = {"shm", "tcp", "shm", "tcp", "shm", "tcp"};
	const enum fi_ep_type types[] = {FI_EP_RDM, FI_EP_RDM, FI_EP_MSG, FI_EP_MSG, FI_EP_DGRAM, FI_EP_DGRAM};
	int k = 0;
	CHECK_OK(fi_getinfo(V, NULL, NULL, 0, NULL, &info));
	for (i = info; i; i = i->next) {
		if (strcasecmp(i->fabric_attr->prov_name, "rustfab"))
			continue;
		if (k >= 6 || strcmp(dom(i), want[k]) || i->ep_attr->type != types[k]) {
			fi_freeinfo(info);
			FAIL_AT("rustfab entry %d has domain %s", k, dom(i));
		}
		if (types[k] == FI_EP_MSG && i->addr_format != FI_SOCKADDR_IN) {
			fi_freeinfo(info);
			FAIL_AT("MSG entry %d: address format %u", k, i->addr_format);
		}
		k++;
	}
	fi_freeinfo(info);
	CHECK_EQ(k, 6);
}

TEST(entries_are_complete)
{
	struct fi_info *info = NULL, *i;
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 2);
	for (i = info; i; i = i->next) {
		CHECK(i->tx_attr && i->rx_attr && i->ep_attr && i->domain_attr && i->fabric_attr);
		CHECK(!strcmp(i->fabric_attr->name, "rustfab"));
		/* Filled by the core, exactly once: no "rustfab;rustfab". */
		CHECK(!strcmp(i->fabric_attr->prov_name, "rustfab"));
		CHECK_EQ(i->fabric_attr->prov_version, FI_RUSTFAB_VERSION);
		CHECK_EQ(i->fabric_attr->api_version, V);
		CHECK_EQ(i->ep_attr->type, FI_EP_RDM);
		CHECK(i->ep_attr->protocol & (1U << 31));
		CHECK_EQ(i->ep_attr->protocol_version, 1);
		CHECK(i->ep_attr->mem_tag_format >> 63);
		CHECK(i->ep_attr->max_msg_size >= (1 << 24));
		CHECK_EQ(i->mode, 0);
		CHECK(i->caps & FI_TAGGED);
		CHECK(i->caps & FI_MSG);
		CHECK(i->caps & FI_DIRECTED_RECV);
		CHECK(i->caps & FI_LOCAL_COMM);
		CHECK_EQ(i->tx_attr->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM), 0);
		CHECK_EQ(i->rx_attr->caps & ~i->caps, 0);
		CHECK_EQ(i->tx_attr->msg_order, FI_ORDER_SAS);
		CHECK_EQ(i->rx_attr->msg_order, FI_ORDER_SAS);
		CHECK(i->tx_attr->inject_size > 0);
		CHECK(i->domain_attr->cq_data_size >= 4);
		CHECK_EQ(i->domain_attr->mr_mode, 0);
		CHECK_EQ(i->domain_attr->threading, FI_THREAD_SAFE);
		CHECK_EQ(i->domain_attr->resource_mgmt, FI_RM_ENABLED);
		CHECK(i->src_addr != NULL);
		CHECK(i->dest_addr == NULL);
		CHECK(i->nic == NULL);
	}
	/* shm is host-local, tcp is not. */
	CHECK(!strcmp(dom(info), "shm"));
	CHECK_EQ(info->caps & FI_REMOTE_COMM, 0);
	CHECK_EQ(info->addr_format, FI_ADDR_STR);
	CHECK(is_shm_addr(info->src_addr, info->src_addrlen));
	CHECK(!strcmp(dom(info->next), "tcp"));
	CHECK(info->next->caps & FI_REMOTE_COMM);
	CHECK_EQ(info->next->addr_format, FI_SOCKADDR_IN);
	CHECK(is_sin(info->next->src_addr, info->next->src_addrlen, "0.0.0.0", 0));
	fi_freeinfo(info);
}

/* provider.rs pre-sets disable_layering: ofi_rxm never wraps rustfab. */
TEST(no_layered_entries)
{
	struct fi_info *info = NULL, *i;
	int found = 0;
	CHECK_OK(fi_getinfo(V, NULL, NULL, 0, NULL, &info));
	for (i = info; i; i = i->next) {
		const char *p = i->fabric_attr->prov_name;
		if (strstr(p, "rustfab") && strcmp(p, "rustfab")) {
			fi_freeinfo(info);
			FAIL_AT("layered entry %s", p);
		}
		found += !strcmp(p, "rustfab");
	}
	fi_freeinfo(info);
	CHECK_EQ(found, 6); /* RDM shm, tcp; MSG shm, tcp; DGRAM shm, tcp */
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_UNSPEC), NULL, NULL, 0, &info));
	for (i = info; i; i = i->next)
		CHECK(!strcmp(i->fabric_attr->prov_name, "rustfab"));
	fi_freeinfo(info);
}

TEST(matching_hints_narrow_caps)
{
	struct fi_info *h = rf_hints(NULL, FI_EP_RDM), *info = NULL, *i;
	CHECK(h);
	h->caps = FI_TAGGED;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	CHECK_OK(rf_get(h, NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 2);
	for (i = info; i; i = i->next) {
		CHECK(i->caps & FI_TAGGED);
		CHECK_EQ(i->caps & (FI_MSG | FI_DIRECTED_RECV | FI_MULTI_RECV), 0);
		CHECK_EQ(i->tx_attr->caps, FI_TAGGED | FI_SEND);
		CHECK_EQ(i->rx_attr->caps, FI_TAGGED | FI_RECV);
		CHECK_EQ(i->mode, 0); /* nothing required */
	}
	fi_freeinfo(info);
}

typedef void (*mutate_fn)(struct fi_info *);
static void m_caps_rma(struct fi_info *h) { h->caps = FI_RMA | FI_RMA_PMEM; } /* RMA is offered, persistent memory not */
static void m_caps_trigger(struct fi_info *h) { h->caps = FI_MSG | FI_TRIGGER; h->ep_attr->type = FI_EP_MSG; } /* triggered ops on RDM only */
static void m_caps_hmem(struct fi_info *h) { h->caps = FI_MSG | FI_HMEM; }
static void m_tx_size(struct fi_info *h) { h->tx_attr->size = 1 << 20; }
static void m_rx_size(struct fi_info *h) { h->rx_attr->size = 1 << 20; }
static void m_inject(struct fi_info *h) { h->tx_attr->inject_size = 1 << 20; }
static void m_tx_iov(struct fi_info *h) { h->tx_attr->iov_limit = 1024; }
static void m_rx_iov(struct fi_info *h) { h->rx_attr->iov_limit = 1024; }
static void m_rma_iov(struct fi_info *h) { h->caps = FI_RMA; h->tx_attr->rma_iov_limit = 9; } /* limit 8 */
static void m_msg_size(struct fi_info *h) { h->ep_attr->max_msg_size = (size_t)1 << 40; }
static void m_cq_data(struct fi_info *h) { h->domain_attr->cq_data_size = 16; }
static void m_ep_cnt(struct fi_info *h) { h->domain_attr->ep_cnt = 1 << 20; }
static void m_mr_cnt(struct fi_info *h) { h->domain_attr->mr_cnt = (size_t)1 << 40; }
static void m_fmt_ib(struct fi_info *h) { h->addr_format = FI_SOCKADDR_IB; }
static void m_fmt_psmx(struct fi_info *h) { h->addr_format = FI_ADDR_PSMX; }
static void m_dom_name(struct fi_info *h) { h->domain_attr->name = strdup("eth0"); }
static void m_fab_name(struct fi_info *h) { h->fabric_attr->name = strdup("192.0.2.0/24"); }
static void m_ep_msg(struct fi_info *h) { h->ep_attr->type = FI_EP_MSG; h->caps = FI_MSG | FI_DIRECTED_RECV; }
static void m_ep_dgram(struct fi_info *h) { h->ep_attr->type = FI_EP_DGRAM; h->caps = FI_MSG | FI_RMA; } /* datagrams carry messages only */
static void m_tx_order(struct fi_info *h) { h->tx_attr->msg_order = FI_ORDER_STRICT; }
static void m_comp_order(struct fi_info *h) { h->rx_attr->comp_order = FI_ORDER_STRICT; }
static void m_op_commit(struct fi_info *h) { h->tx_attr->op_flags = FI_COMMIT_COMPLETE; }
static void m_tx_ctx(struct fi_info *h) { h->ep_attr->tx_ctx_cnt = 17; } /* 16 contexts at most */
/* One shared context of each kind per endpoint (test_shared_ctx.c). */
static void m_stx(struct fi_info *h) { h->domain_attr->max_ep_stx_ctx = 2; }
static void m_mr_basic_plus(struct fi_info *h) { h->domain_attr->mr_mode = FI_MR_BASIC | FI_MR_LOCAL; }
static void m_threading(struct fi_info *h) { h->domain_attr->threading = (enum fi_threading)42; }
/* Named AVs serve RDM endpoints only. */
static void m_shared_av(struct fi_info *h) { h->ep_attr->type = FI_EP_MSG; h->caps = FI_MSG | FI_SHARED_AV; }
/* Keys are taken by tcp RDM endpoints only (docs/security.md). */
static void m_auth_key(struct fi_info *h)
{
	free(h->domain_attr->name);
	h->domain_attr->name = strdup("shm");
	h->domain_attr->auth_key = malloc(4);
	memcpy(h->domain_attr->auth_key, "key", 4);
	h->domain_attr->auth_key_size = 4;
}

TEST(nonmatching_hints_enodata)
{
	static const struct {
		const char *what;
		mutate_fn f;
	} cases[] = {
		{"caps FI_RMA_PMEM", m_caps_rma},
		{"caps FI_TRIGGER on FI_EP_MSG", m_caps_trigger},
		{"caps FI_HMEM", m_caps_hmem},
		{"tx size", m_tx_size},
		{"rx size", m_rx_size},
		{"inject_size", m_inject},
		{"tx iov_limit", m_tx_iov},
		{"rx iov_limit", m_rx_iov},
		{"rma_iov_limit", m_rma_iov},
		{"max_msg_size", m_msg_size},
		{"cq_data_size", m_cq_data},
		{"ep_cnt", m_ep_cnt},
		{"mr_cnt", m_mr_cnt},
		{"addr_format IB", m_fmt_ib},
		{"addr_format PSMX", m_fmt_psmx},
		{"domain name", m_dom_name},
		{"fabric name", m_fab_name},
		{"FI_EP_MSG with FI_DIRECTED_RECV", m_ep_msg},
		{"FI_EP_DGRAM with FI_RMA", m_ep_dgram},
		{"tx msg_order", m_tx_order},
		{"rx comp_order", m_comp_order},
		{"FI_COMMIT_COMPLETE", m_op_commit},
		{"tx_ctx_cnt 17", m_tx_ctx},
		{"two shared tx contexts", m_stx},
		{"mr_mode BASIC|LOCAL", m_mr_basic_plus},
		{"threading", m_threading},
		{"FI_SHARED_AV on FI_EP_MSG", m_shared_av},
		{"auth_key on shm", m_auth_key},
	};
	size_t k;
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct fi_info *h = rf_hints(NULL, FI_EP_UNSPEC), *info = NULL;
		int ret;
		CHECK(h);
		cases[k].f(h);
		ret = rf_get(h, NULL, NULL, 0, &info);
		if (ret != -FI_ENODATA || info) {
			fi_freeinfo(info);
			FAIL_AT("%s: fi_getinfo returned %d, info %p", cases[k].what, ret, (void *)info);
		}
	}
}

TEST(limits_exactly_met)
{
	struct fi_info *first = NULL, *h = rf_hints(NULL, FI_EP_RDM), *info = NULL;
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), NULL, NULL, 0, &first));
	CHECK(h);
	h->tx_attr->size = first->tx_attr->size;
	h->tx_attr->inject_size = first->tx_attr->inject_size;
	h->tx_attr->iov_limit = first->tx_attr->iov_limit;
	h->rx_attr->size = first->rx_attr->size;
	h->ep_attr->max_msg_size = first->ep_attr->max_msg_size;
	h->domain_attr->cq_data_size = first->domain_attr->cq_data_size;
	fi_freeinfo(first);
	CHECK_OK(rf_get(h, NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 2);
	fi_freeinfo(info);
}

TEST(domain_name_selects_transport)
{
	struct fi_info *info = NULL;
	CHECK_OK(rf_get(rf_hints("shm", FI_EP_RDM), NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "shm"));
	fi_freeinfo(info);
	CHECK_OK(rf_get(rf_hints("tcp", FI_EP_RDM), NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "tcp"));
	fi_freeinfo(info);
}

TEST(addr_format_selects_transport)
{
	struct fi_info *h, *info = NULL;
	h = rf_hints(NULL, FI_EP_RDM);
	h->addr_format = FI_ADDR_STR;
	CHECK_OK(rf_get(h, NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "shm"));
	CHECK_EQ(info->addr_format, FI_ADDR_STR);
	CHECK(is_shm_addr(info->src_addr, info->src_addrlen));
	fi_freeinfo(info);

	h = rf_hints(NULL, FI_EP_RDM);
	h->addr_format = FI_SOCKADDR_IN;
	CHECK_OK(rf_get(h, NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "tcp"));
	CHECK_EQ(info->addr_format, FI_SOCKADDR_IN);
	CHECK(is_sin(info->src_addr, info->src_addrlen, NULL, -1));
	fi_freeinfo(info);

	h = rf_hints(NULL, FI_EP_RDM);
	h->addr_format = FI_SOCKADDR_IN6;
	CHECK_OK(rf_get(h, NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "tcp"));
	CHECK_EQ(info->addr_format, FI_SOCKADDR_IN6);
	CHECK(is_sin6(info->src_addr, info->src_addrlen, "::", 0));
	fi_freeinfo(info);
}

TEST(node_service_ipv4)
{
	struct fi_info *info = NULL, *tcp;
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), "127.0.0.1", "9228", 0, &info));
	CHECK_EQ(n_entries(info), 2);
	CHECK(!strcmp(dom(info), "shm"));
	CHECK(is_shm_addr(info->dest_addr, info->dest_addrlen));
	CHECK(is_shm_addr(info->src_addr, info->src_addrlen));
	tcp = info->next;
	CHECK(!strcmp(dom(tcp), "tcp"));
	CHECK_EQ(tcp->addr_format, FI_SOCKADDR_IN);
	CHECK(is_sin(tcp->dest_addr, tcp->dest_addrlen, "127.0.0.1", 9228));
	CHECK(is_sin(tcp->src_addr, tcp->src_addrlen, "127.0.0.1", 0));
	fi_freeinfo(info);

	/* localhost resolves too; FI_NUMERICHOST refuses the name. */
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), "localhost", "9228", 0, &info));
	CHECK_EQ(n_entries(info), 2);
	fi_freeinfo(info);
	CHECK_EQ(rf_get(rf_hints(NULL, FI_EP_RDM), "localhost", "9228", FI_NUMERICHOST, &info), -FI_ENODATA);
}

TEST(node_service_ipv6)
{
	struct fi_info *h = rf_hints(NULL, FI_EP_RDM), *info = NULL;
	CHECK(h);
	h->addr_format = FI_SOCKADDR_IN6;
	CHECK_OK(rf_get(h, "::1", "9228", 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "tcp"));
	CHECK_EQ(info->addr_format, FI_SOCKADDR_IN6);
	CHECK(is_sin6(info->dest_addr, info->dest_addrlen, "::1", 9228));
	CHECK(is_sin6(info->src_addr, info->src_addrlen, "::1", 0));
	fi_freeinfo(info);

	/* No format asked for: ::1 still works, and is local (shm too). */
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), "::1", "9228", 0, &info));
	CHECK_EQ(n_entries(info), 2);
	CHECK_EQ(info->next->addr_format, FI_SOCKADDR_IN6);
	fi_freeinfo(info);

	/* An IPv4 format cannot carry it. */
	h = rf_hints(NULL, FI_EP_RDM);
	h->addr_format = FI_SOCKADDR_IN;
	CHECK_EQ(rf_get(h, "::1", "9228", 0, &info), -FI_ENODATA);
}

TEST(fi_source)
{
	struct fi_info *info = NULL, *tcp;
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), "127.0.0.1", "9228", FI_SOURCE, &info));
	CHECK_EQ(n_entries(info), 2);
	CHECK(is_shm_addr(info->src_addr, info->src_addrlen));
	CHECK(info->dest_addr == NULL);
	tcp = info->next;
	CHECK(is_sin(tcp->src_addr, tcp->src_addrlen, "127.0.0.1", 9228));
	CHECK(tcp->dest_addr == NULL);
	fi_freeinfo(info);

	/* Service only: tcp listens on every interface. */
	CHECK_OK(rf_get(rf_hints("tcp", FI_EP_RDM), NULL, "9228", FI_SOURCE, &info));
	CHECK(is_sin(info->src_addr, info->src_addrlen, "0.0.0.0", 9228));
	fi_freeinfo(info);

	/* FI_SOURCE needs a node or a service. */
	CHECK_EQ(rf_get(rf_hints(NULL, FI_EP_RDM), NULL, NULL, FI_SOURCE, &info), -FI_ENODATA);
}

/* The fabtests pattern: the server's named source is the client's
 * destination, for both transports. */
TEST(server_source_is_client_destination)
{
	struct fi_info *srv = NULL, *cli = NULL, *s, *c;
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), "127.0.0.1", "9228", FI_SOURCE, &srv));
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), "127.0.0.1", "9228", 0, &cli));
	for (s = srv, c = cli; s && c; s = s->next, c = c->next) {
		CHECK(!strcmp(dom(s), dom(c)));
		CHECK_EQ(s->src_addrlen, c->dest_addrlen);
		CHECK(!memcmp(s->src_addr, c->dest_addr, s->src_addrlen));
	}
	CHECK(!s && !c);
	fi_freeinfo(srv);
	fi_freeinfo(cli);

	/* Different services name different shm endpoints. */
	CHECK_OK(rf_get(rf_hints("shm", FI_EP_RDM), "127.0.0.1", "9228", 0, &srv));
	CHECK_OK(rf_get(rf_hints("shm", FI_EP_RDM), "127.0.0.1", "9229", 0, &cli));
	CHECK(memcmp(srv->dest_addr, cli->dest_addr, SHM_ADDR_LEN));
	fi_freeinfo(srv);
	fi_freeinfo(cli);
}

/* fabtests' client: addresses from one fi_getinfo become the next hints. */
TEST(hint_addresses_are_used)
{
	struct fi_info *src = NULL, *h, *info = NULL;
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), "127.0.0.1", "7000", FI_SOURCE, &src));
	h = rf_hints(NULL, FI_EP_RDM);
	h->addr_format = src->addr_format; /* the first entry: shm */
	h->src_addr = malloc(src->src_addrlen);
	memcpy(h->src_addr, src->src_addr, src->src_addrlen);
	h->src_addrlen = src->src_addrlen;
	CHECK_OK(rf_get(h, "127.0.0.1", "9228", 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "shm"));
	CHECK_EQ(info->src_addrlen, src->src_addrlen);
	CHECK(!memcmp(info->src_addr, src->src_addr, src->src_addrlen));
	CHECK(is_shm_addr(info->dest_addr, info->dest_addrlen));
	fi_freeinfo(info);

	/* A tcp destination in the hints selects tcp and is copied. */
	h = rf_hints(NULL, FI_EP_RDM);
	h->addr_format = FI_SOCKADDR_IN;
	h->dest_addr = malloc(src->next->src_addrlen);
	memcpy(h->dest_addr, src->next->src_addr, src->next->src_addrlen);
	h->dest_addrlen = src->next->src_addrlen;
	fi_freeinfo(src);
	CHECK_OK(rf_get(h, NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "tcp"));
	CHECK(is_sin(info->dest_addr, info->dest_addrlen, "127.0.0.1", 7000));
	fi_freeinfo(info);
}

TEST(remote_node_selects_tcp)
{
	struct fi_info *info = NULL;
	/* TEST-NET-3: never an address of this host. */
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), "203.0.113.5", "9228", 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "tcp"));
	CHECK(is_sin(info->dest_addr, info->dest_addrlen, "203.0.113.5", 9228));
	CHECK(info->src_addr != NULL);
	fi_freeinfo(info);
	CHECK_EQ(rf_get(rf_hints("shm", FI_EP_RDM), "203.0.113.5", "9228", 0, &info), -FI_ENODATA);
}

TEST(transport_parameter)
{
	struct fi_info *info = NULL;
	setenv("FI_RUSTFAB_TRANSPORT", "shm", 1);
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "shm"));
	fi_freeinfo(info);
	setenv("FI_RUSTFAB_TRANSPORT", "tcp", 1);
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "tcp"));
	fi_freeinfo(info);
	setenv("FI_RUSTFAB_TRANSPORT", "auto", 1);
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "auto"));
	fi_freeinfo(info);
	setenv("FI_RUSTFAB_TRANSPORT", "shm,tcp", 1);
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 2);
	fi_freeinfo(info);
	setenv("FI_RUSTFAB_TRANSPORT", "all", 1);
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 3);
	fi_freeinfo(info);
	setenv("FI_RUSTFAB_TRANSPORT", "shm,tcp", 1);
}

/* The default list: the auto entry (shm to this host, tcp to the others)
 * first, with both FI_LOCAL_COMM and FI_REMOTE_COMM and a fixed-length
 * FI_ADDR_STR address; Open MPI's hints pick it. */
TEST(default_list_starts_with_auto)
{
	struct fi_info *info = NULL, *i;
	unsetenv("FI_RUSTFAB_TRANSPORT");
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 3);
	const char *want[] = {"auto", "shm", "tcp"};
	int k = 0;
	for (i = info; i; i = i->next, k++)
		CHECK(!strcmp(dom(i), want[k]));
	CHECK_EQ(info->addr_format, FI_ADDR_STR);
	CHECK_EQ(info->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM), FI_LOCAL_COMM | FI_REMOTE_COMM);
	CHECK(info->src_addr && !strncmp(info->src_addr, FI_RUSTFAB_AUTO_ADDR_PREFIX, strlen(FI_RUSTFAB_AUTO_ADDR_PREFIX)));
	CHECK_EQ(info->src_addrlen, FI_RUSTFAB_AUTO_ADDR_LEN);
	fi_freeinfo(info);
	/* Open MPI's caps select auto first */
	struct fi_info *h = rf_hints(NULL, FI_EP_RDM);
	h->caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
	CHECK_OK(fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, h, &info));
	fi_freeinfo(h);
	CHECK(!strcmp(dom(info), "auto"));
	CHECK(!strcmp(dom(info->next), "tcp"));
	fi_freeinfo(info);
	setenv("FI_RUSTFAB_TRANSPORT", "shm,tcp", 1);
}

/* <rdma/fi_ext_rustfab.h> says what the provider does: its name, version,
 * domain names and protocols (every entry of the default list), address
 * lengths (a real shm and auto endpoint name), and its parameter names
 * (fi_getparams, what fi_info -e lists). */
TEST(extension_header_matches_provider)
{
	struct fi_info *info = NULL, *i;
	unsetenv(FI_RUSTFAB_ENV_TRANSPORT);
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_UNSPEC), NULL, NULL, 0, &info));
	/* RDM auto, shm, tcp; then MSG auto, shm, tcp; then DGRAM auto and shm
	 * (over the shm rings) and tcp (UDP) */
	const char *doms[] = {FI_RUSTFAB_DOMAIN_AUTO, FI_RUSTFAB_DOMAIN_SHM, FI_RUSTFAB_DOMAIN_TCP,
			      FI_RUSTFAB_DOMAIN_AUTO, FI_RUSTFAB_DOMAIN_SHM, FI_RUSTFAB_DOMAIN_TCP,
			      FI_RUSTFAB_DOMAIN_AUTO, FI_RUSTFAB_DOMAIN_SHM, FI_RUSTFAB_DOMAIN_TCP};
	const uint32_t protos[] = {FI_RUSTFAB_PROTO_AUTO, FI_RUSTFAB_PROTO_SHM, FI_RUSTFAB_PROTO_TCP,
				   FI_RUSTFAB_PROTO_AUTO, FI_RUSTFAB_PROTO_SHM, FI_RUSTFAB_PROTO_TCP,
				   FI_RUSTFAB_PROTO_SHM,  FI_RUSTFAB_PROTO_SHM, FI_RUSTFAB_PROTO_UDP};
	const enum fi_ep_type types[] = {FI_EP_RDM, FI_EP_RDM, FI_EP_RDM, FI_EP_MSG, FI_EP_MSG, FI_EP_MSG,
					 FI_EP_DGRAM, FI_EP_DGRAM, FI_EP_DGRAM};
	int k = 0;
	for (i = info; i && k < 9; i = i->next, k++) {
		CHECK_EQ(i->ep_attr->type, types[k]);
		CHECK(!strcmp(i->fabric_attr->prov_name, FI_RUSTFAB_PROV_NAME));
		CHECK_EQ(i->fabric_attr->prov_version, FI_RUSTFAB_VERSION);
		CHECK(!strcmp(dom(i), doms[k]));
		CHECK_EQ(i->ep_attr->protocol, protos[k]);
	}
	CHECK_EQ(k, 9);
	CHECK(i == NULL);
	fi_freeinfo(info);
	setenv(FI_RUSTFAB_ENV_TRANSPORT, "shm,tcp", 1);
	char ver[32];
	snprintf(ver, sizeof ver, "%d.%d.", FI_RUSTFAB_MAJOR_VERSION, FI_RUSTFAB_MINOR_VERSION);
	CHECK(!strncmp(FI_RUSTFAB_VERSION_STRING, ver, strlen(ver)));

	/* the names real endpoints get */
	const char *names[] = {FI_RUSTFAB_DOMAIN_SHM, FI_RUSTFAB_DOMAIN_AUTO};
	const char *prefixes[] = {FI_RUSTFAB_SHM_ADDR_PREFIX, FI_RUSTFAB_AUTO_ADDR_PREFIX};
	const size_t lens[] = {FI_RUSTFAB_SHM_ADDR_LEN, FI_RUSTFAB_AUTO_ADDR_LEN};
	for (int t = 0; t < 2; t++) {
		struct fid_fabric *fab;
		struct fid_domain *d;
		struct fid_av *av;
		struct fid_ep *ep;
		struct fi_av_attr aa = {.type = FI_AV_MAP};
		char name[FI_NAME_MAX];
		size_t len = sizeof name;
		setenv(FI_RUSTFAB_ENV_TRANSPORT, names[t], 1);
		CHECK_OK(rf_get(rf_hints(names[t], FI_EP_RDM), NULL, NULL, 0, &info));
		setenv(FI_RUSTFAB_ENV_TRANSPORT, "shm,tcp", 1);
		CHECK_OK(fi_fabric(info->fabric_attr, &fab, NULL));
		CHECK_OK(fi_domain(fab, info, &d, NULL));
		CHECK_OK(fi_av_open(d, &aa, &av, NULL));
		CHECK_OK(fi_endpoint(d, info, &ep, NULL));
		CHECK_OK(fi_ep_bind(ep, &av->fid, 0));
		CHECK_OK(fi_getname(&ep->fid, name, &len));
		CHECK_EQ(len, lens[t]);
		CHECK_EQ(strlen(name) + 1, lens[t]);
		CHECK(!strncmp(name, prefixes[t], strlen(prefixes[t])));
		fi_close(&ep->fid);
		fi_close(&av->fid);
		fi_close(&d->fid);
		fi_close(&fab->fid);
		fi_freeinfo(info);
	}

	/* every parameter rustfab declares is in the header, and vice versa */
	const char *env[] = {FI_RUSTFAB_ENV_TRANSPORT,    FI_RUSTFAB_ENV_IFACE,        FI_RUSTFAB_ENV_BUFFERED_POOL,
			     FI_RUSTFAB_ENV_UNEXP_BUDGET, FI_RUSTFAB_ENV_TCP_COALESCE, FI_RUSTFAB_ENV_TCP_MAX_CONNS,
			     FI_RUSTFAB_ENV_AUTH_KEY,     FI_RUSTFAB_ENV_SHM_CMA,      FI_RUSTFAB_ENV_SHM_PULL_BATCH,
			     FI_RUSTFAB_ENV_SHM_SPLIT_MIN, FI_RUSTFAB_ENV_SHM_SPLIT_LONE_MIN,
			     FI_RUSTFAB_ENV_SHM_RING_CELLS, FI_RUSTFAB_ENV_SHM_STREAM_LONE_MAX,
			     FI_RUSTFAB_ENV_SHM_CLOSE_WAIT, FI_RUSTFAB_ENV_PEER_BUDGET,
			     FI_RUSTFAB_ENV_PEER_BUDGET_TOTAL, FI_RUSTFAB_ENV_PEER_BUDGET_TIMEOUT,
			     FI_RUSTFAB_ENV_TCP_LINKS};
	const int n_env = sizeof env / sizeof env[0];
	struct fi_param *params;
	int count, ours = 0, found = 0;
	CHECK_OK(fi_getparams(&params, &count));
	for (int p = 0; p < count; p++) {
		if (strncmp(params[p].name, "FI_RUSTFAB_", 11))
			continue;
		ours++;
		for (int e = 0; e < n_env; e++)
			found += !strcmp(params[p].name, env[e]);
	}
	fi_freeparams(params);
	CHECK_EQ(found, n_env);
	CHECK_EQ(ours, n_env);
}

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

TEST(dupinfo_and_freeinfo)
{
	struct fi_info *info = NULL, *i, *d;
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), "127.0.0.1", "9228", 0, &info));
	for (i = info; i; i = i->next) {
		d = fi_dupinfo(i);
		CHECK(d);
		CHECK(d->next == NULL);
		CHECK_EQ(d->caps, i->caps);
		CHECK_EQ(d->mode, i->mode);
		CHECK_EQ(d->addr_format, i->addr_format);
		CHECK_EQ(d->src_addrlen, i->src_addrlen);
		CHECK_EQ(d->dest_addrlen, i->dest_addrlen);
		CHECK(!memcmp(d->src_addr, i->src_addr, i->src_addrlen));
		CHECK(!memcmp(d->dest_addr, i->dest_addr, i->dest_addrlen));
		CHECK(!memcmp(d->tx_attr, i->tx_attr, sizeof(*i->tx_attr)));
		CHECK(!memcmp(d->rx_attr, i->rx_attr, sizeof(*i->rx_attr)));
		CHECK(!memcmp(d->ep_attr, i->ep_attr, sizeof(*i->ep_attr)));
		CHECK(same_str(d->domain_attr->name, i->domain_attr->name));
		CHECK_EQ(d->domain_attr->mr_mode, i->domain_attr->mr_mode);
		CHECK(same_str(d->fabric_attr->name, i->fabric_attr->name));
		CHECK(same_str(d->fabric_attr->prov_name, i->fabric_attr->prov_name));
		fi_freeinfo(d);
	}
	/* Duplicate the whole list by hand and free both. */
	d = fi_dupinfo(info);
	CHECK(d);
	d->next = fi_dupinfo(info->next);
	CHECK(d->next);
	fi_freeinfo(d);
	fi_freeinfo(info);
}

TEST(results_open_fabric_and_domain)
{
	struct fi_info *info = NULL, *i;
	CHECK_OK(rf_get(rf_hints(NULL, FI_EP_RDM), NULL, NULL, 0, &info));
	for (i = info; i; i = i->next) {
		struct fid_fabric *fab = NULL;
		struct fid_domain *domain = NULL;
		CHECK_OK(fi_fabric(i->fabric_attr, &fab, NULL));
		CHECK_EQ(fab->api_version, V);
		CHECK_OK(fi_domain(fab, i, &domain, NULL));
		CHECK_OK(fi_close(&domain->fid));
		CHECK_OK(fi_close(&fab->fid));
	}
	fi_freeinfo(info);
}

TEST(open_mpi_hints)
{
	/* Open MPI 4.1 mtl/ofi (docs/mpi.md §2). */
	struct fi_info *h = rf_hints(NULL, FI_EP_RDM), *info = NULL;
	CHECK(h);
	h->caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->tx_attr->op_flags = FI_COMPLETION;
	h->rx_attr->op_flags = FI_COMPLETION;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->av_type = FI_AV_MAP;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->domain_attr->cq_data_size = 4;
	CHECK_EQ(fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, h, &info), 0);
	fi_freeinfo(h);
	/* shm is host-local (no FI_REMOTE_COMM): tcp only. */
	CHECK_EQ(n_entries(info), 1);
	CHECK(!strcmp(dom(info), "tcp"));
	CHECK_EQ(info->tx_attr->op_flags, FI_COMPLETION);
	CHECK_EQ(info->rx_attr->op_flags, FI_COMPLETION);
	CHECK_EQ(info->domain_attr->threading, FI_THREAD_DOMAIN);
	CHECK_EQ(info->domain_attr->av_type, FI_AV_MAP);
	CHECK_EQ(info->domain_attr->mr_mode, 0);
	CHECK(info->domain_attr->cq_data_size >= 4);
	CHECK(info->ep_attr->mem_tag_format >> 63);
	CHECK_EQ(info->fabric_attr->api_version, FI_VERSION(1, 5));
	fi_freeinfo(info);
}

TEST(fi_info_verbose_hints)
{
	/* What `fi_info -p rustfab -v` passes. */
	struct fi_info *h = rf_hints(NULL, FI_EP_UNSPEC), *info = NULL, *i;
	CHECK(h);
	h->mode = ~0ULL;
	h->domain_attr->mode = ~0ULL;
	h->domain_attr->mr_mode = ~(FI_MR_BASIC | FI_MR_SCALABLE);
	CHECK_OK(rf_get(h, NULL, NULL, 0, &info));
	CHECK_EQ(n_entries(info), 6); /* RDM shm, tcp; MSG shm, tcp; DGRAM shm, tcp */
	for (i = info; i; i = i->next) {
		CHECK_EQ(i->domain_attr->mr_mode, 0);
		CHECK_EQ(i->domain_attr->mode, 0);
		CHECK_EQ(i->mode & ~FI_BUFFERED_RECV, 0);
	}
	fi_freeinfo(info);
}

TEST(old_api_mr_mode)
{
	struct fi_info *h, *info = NULL;
	/* v1.0-1.4: mr_mode is the old enum, never 0 in the answer. */
	h = rf_hints(NULL, FI_EP_RDM);
	CHECK_OK(fi_getinfo(FI_VERSION(1, 4), NULL, NULL, 0, h, &info));
	CHECK_EQ(info->domain_attr->mr_mode, FI_MR_SCALABLE);
	CHECK_EQ(info->fabric_attr->api_version, FI_VERSION(1, 4));
	fi_freeinfo(info);
	h->domain_attr->mr_mode = FI_MR_BASIC;
	CHECK_OK(fi_getinfo(FI_VERSION(1, 0), NULL, NULL, 0, h, &info));
	CHECK_EQ(info->domain_attr->mr_mode, FI_MR_BASIC);
	fi_freeinfo(info);
	h->domain_attr->mr_mode = FI_MR_LOCAL; /* not an old-enum value */
	CHECK_EQ(fi_getinfo(FI_VERSION(1, 4), NULL, NULL, 0, h, &info), -FI_ENODATA);
	/* 1.17: BASIC asked for is kept. */
	h->domain_attr->mr_mode = FI_MR_BASIC;
	CHECK_OK(fi_getinfo(V, NULL, NULL, 0, h, &info));
	CHECK_EQ(info->domain_attr->mr_mode, FI_MR_BASIC);
	fi_freeinfo(info);
	fi_freeinfo(h);
}

TEST(echoed_values)
{
	struct fi_info *h = rf_hints(NULL, FI_EP_RDM), *info = NULL, *i;
	CHECK(h);
	h->domain_attr->control_progress = FI_PROGRESS_AUTO;
	h->domain_attr->data_progress = FI_PROGRESS_AUTO;
	h->domain_attr->av_type = FI_AV_TABLE;
	h->domain_attr->threading = FI_THREAD_COMPLETION;
	h->tx_attr->size = 64;
	h->tx_attr->inject_size = 32;
	h->rx_attr->size = 128;
	h->rx_attr->op_flags = FI_MULTI_RECV;
	h->mode = FI_BUFFERED_RECV;
	CHECK_OK(rf_get(h, NULL, NULL, 0, &info));
	for (i = info; i; i = i->next) {
		CHECK_EQ(i->domain_attr->control_progress, FI_PROGRESS_AUTO);
		CHECK_EQ(i->domain_attr->data_progress, FI_PROGRESS_AUTO);
		CHECK_EQ(i->domain_attr->av_type, FI_AV_TABLE);
		CHECK_EQ(i->domain_attr->threading, FI_THREAD_COMPLETION);
		CHECK_EQ(i->tx_attr->size, 64);
		CHECK_EQ(i->tx_attr->inject_size, 32);
		CHECK_EQ(i->rx_attr->size, 128);
		CHECK_EQ(i->rx_attr->op_flags, FI_MULTI_RECV);
		/* Buffered receives are offered: the mode bit the hints allow is
		 * kept (test_buffered covers the behaviour). */
		CHECK_EQ(i->mode, FI_BUFFERED_RECV);
		CHECK_EQ(i->rx_attr->mode, FI_BUFFERED_RECV);
	}
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	/* The per-transport rules are tested on the shm and tcp entries; the
	 * default list with the auto entry first has its own test. */
	setenv("FI_RUSTFAB_TRANSPORT", "shm,tcp", 1);
	RUN(default_list_starts_with_auto);
	RUN(extension_header_matches_provider);
	RUN(null_hints_shm_then_tcp);
	RUN(entries_are_complete);
	RUN(no_layered_entries);
	RUN(matching_hints_narrow_caps);
	RUN(nonmatching_hints_enodata);
	RUN(limits_exactly_met);
	RUN(domain_name_selects_transport);
	RUN(addr_format_selects_transport);
	RUN(node_service_ipv4);
	RUN(node_service_ipv6);
	RUN(fi_source);
	RUN(server_source_is_client_destination);
	RUN(hint_addresses_are_used);
	RUN(remote_node_selects_tcp);
	RUN(transport_parameter);
	RUN(dupinfo_and_freeinfo);
	RUN(results_open_fabric_and_domain);
	RUN(open_mpi_hints);
	RUN(fi_info_verbose_hints);
	RUN(old_api_mr_mode);
	RUN(echoed_values);
	return harness_done();
}
