/* Address vectors through the public API, on both transports and both AV
 * types: open attributes, insert/lookup/straddr/remove, packed arrays, bad
 * addresses, FI_AV_TABLE indices, NULL fi_addr, lookup truncation,
 * insertsvc/insertsym, FI_SYNC_ERR / FI_AV_USER_ID, -FI_EBUSY rules and
 * NULL/invalid arguments to every entry point.
 *
 * The fi_info for fi_domain is built by hand (fi_getinfo lives elsewhere).
 * Tests that need an EQ (asynchronous inserts) print "skipped" while
 * fi_eq_open returns -FI_ENOSYS and run in full once EQs exist. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <rdma/fi_collective.h>
#include "harness.h"

#define SHM_LEN 34

static struct fid_fabric *fab;
static struct fid_domain *dom;

/* Opens fab/dom on transport `name` ("shm"/"tcp") with `fmt`. */
static int open_dom(const char *name, uint32_t fmt)
{
	struct fi_info *info = fi_allocinfo();
	int ret;

	if (!info)
		return -FI_ENOMEM;
	info->fabric_attr->name = strdup("rustfab");
	info->fabric_attr->prov_name = strdup("rustfab");
	info->fabric_attr->api_version = FI_VERSION(1, 17);
	info->domain_attr->name = strdup(name);
	info->addr_format = fmt;
	ret = fi_fabric(info->fabric_attr, &fab, NULL);
	if (!ret) {
		ret = fi_domain(fab, info, &dom, NULL);
		if (ret)
			fi_close(&fab->fid);
	}
	fi_freeinfo(info);
	return ret;
}

static int close_dom(void)
{
	int ret = fi_close(&dom->fid);
	if (ret)
		return ret;
	return fi_close(&fab->fid);
}

static int open_av(enum fi_av_type type, uint64_t flags, struct fid_av **av)
{
	struct fi_av_attr attr = {0};
	attr.type = type;
	attr.count = 16;
	attr.flags = flags;
	return fi_av_open(dom, &attr, av, NULL);
}

/* The token fi_getinfo gives an shm endpoint named node:service (FNV-1a). */
static uint64_t shm_token_for(const char *node, const char *svc)
{
	char s[256];
	uint64_t h = 0xcbf29ce484222325ULL;
	/* Shared memory is host-local: a service alone names the endpoint. */
	if (svc)
		snprintf(s, sizeof s, ":%s", svc);
	else
		snprintf(s, sizeof s, "%s:", node ? node : "");
	for (const char *p = s; *p; p++) {
		h ^= (uint8_t)*p;
		h *= 0x100000001b3ULL;
	}
	return h ? h : 1;
}

static void shm_name(uint64_t tok, char out[SHM_LEN])
{
	snprintf(out, SHM_LEN, "fi_rustfab_shm://%016" PRIx64, tok);
}

/* n packed shm names with tokens base, base+1, ... */
static void pack_shm(char *buf, uint64_t base, int n)
{
	for (int i = 0; i < n; i++)
		shm_name(base + i, buf + i * SHM_LEN);
}

static struct sockaddr_in sin4(const char *ip, uint16_t port)
{
	struct sockaddr_in s;
	memset(&s, 0, sizeof s);
	s.sin_family = AF_INET;
	s.sin_port = htons(port);
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

static struct sockaddr_in6 sin6(const char *ip, uint16_t port)
{
	struct sockaddr_in6 s;
	memset(&s, 0, sizeof s);
	s.sin6_family = AF_INET6;
	s.sin6_port = htons(port);
	inet_pton(AF_INET6, ip, &s.sin6_addr);
	return s;
}

static const enum fi_av_type types[] = {FI_AV_MAP, FI_AV_TABLE};

/* ---------------------------------------------------------------- open */

TEST(av_open_close_all_types)
{
	const char *tr[] = {"shm", "tcp"};
	uint32_t fmts[] = {FI_ADDR_STR, FI_SOCKADDR_IN};
	for (int t = 0; t < 2; t++) {
		CHECK_OK(open_dom(tr[t], fmts[t]));
		for (int i = 0; i < 3; i++) {
			enum fi_av_type ty[] = {FI_AV_MAP, FI_AV_TABLE, FI_AV_UNSPEC};
			struct fi_av_attr attr = {0};
			struct fid_av *av = NULL;
			int ctx;
			attr.type = ty[i];
			attr.count = 1 << 16;
			CHECK_OK(fi_av_open(dom, &attr, &av, &ctx));
			CHECK(av != NULL);
			CHECK_EQ(av->fid.fclass, FI_CLASS_AV);
			CHECK(av->fid.context == &ctx);
			/* "The AV type used will be returned through the type field" */
			CHECK_EQ(attr.type, ty[i] == FI_AV_UNSPEC ? FI_AV_TABLE : ty[i]);
			CHECK_OK(fi_close(&av->fid));
		}
		for (int i = 0; i < 17; i++) { /* fabtests av_open_close sizes */
			struct fid_av *av;
			struct fi_av_attr attr = {0};
			attr.type = FI_AV_TABLE;
			attr.count = (size_t)1 << i;
			CHECK_OK(fi_av_open(dom, &attr, &av, NULL));
			CHECK_OK(fi_close(&av->fid));
		}
		CHECK_OK(close_dom());
	}
}

TEST(av_open_bad_attributes)
{
	struct fid_av *av = NULL;
	struct fi_av_attr attr = {0};
	CHECK_OK(open_dom("shm", FI_ADDR_STR));
	attr.type = FI_AV_TABLE;
	attr.rx_ctx_bits = 17; /* at most 16 bits name a receive context */
	CHECK_EQ(fi_av_open(dom, &attr, &av, NULL), -FI_EINVAL);
	attr.rx_ctx_bits = -1;
	CHECK_EQ(fi_av_open(dom, &attr, &av, NULL), -FI_EINVAL);
	attr.rx_ctx_bits = 0;
	attr.type = 77;
	CHECK_EQ(fi_av_open(dom, &attr, &av, NULL), -FI_EINVAL);
	attr.type = FI_AV_TABLE;
	attr.flags = FI_MORE;
	CHECK_EQ(fi_av_open(dom, &attr, &av, NULL), -FI_EINVAL);
	attr.flags = FI_READ; /* read-only needs a name */
	CHECK_EQ(fi_av_open(dom, &attr, &av, NULL), -FI_EINVAL);
	attr.flags = 0;
	attr.name = "shared/av"; /* named AVs: c-tests/test_shared_av.c */
	CHECK_EQ(fi_av_open(dom, &attr, &av, NULL), -FI_EINVAL);
	attr.name = "rustfab-test-av-that-does-not-exist";
	attr.flags = FI_READ;
	CHECK_EQ(fi_av_open(dom, &attr, &av, NULL), -FI_ENOENT);
	attr.name = NULL;
	attr.flags = FI_SYMMETRIC | FI_EVENT;
	CHECK_OK(fi_av_open(dom, &attr, &av, NULL));
	CHECK_OK(fi_close(&av->fid));
	attr.flags = 0;
	CHECK_EQ(fi_av_open(dom, NULL, &av, NULL), -FI_EINVAL);
	CHECK_EQ(fi_av_open(dom, &attr, NULL, NULL), -FI_EINVAL);
	/* nothing leaked by the failed calls: the domain closes */
	CHECK_OK(close_dom());
}

/* ---------------------------------------------------------------- shm */

TEST(shm_insert_lookup_remove)
{
	CHECK_OK(open_dom("shm", FI_ADDR_STR));
	for (int t = 0; t < 2; t++) {
		struct fid_av *av;
		char buf[4 * SHM_LEN], out[64];
		fi_addr_t fa[4] = {0};
		size_t len;
		CHECK_OK(open_av(types[t], 0, &av));
		pack_shm(buf, 0x100, 3);
		CHECK_EQ(fi_av_insert(av, buf, 3, fa, 0, NULL), 3);
		for (int i = 0; i < 3; i++) {
			if (types[t] == FI_AV_TABLE)
				CHECK_EQ(fa[i], i);
			CHECK(fa[i] != FI_ADDR_NOTAVAIL);
			len = sizeof out;
			CHECK_OK(fi_av_lookup(av, fa[i], out, &len));
			CHECK_EQ(len, SHM_LEN);
			CHECK(!memcmp(out, buf + i * SHM_LEN, SHM_LEN));
			len = sizeof out;
			CHECK(fi_av_straddr(av, buf + i * SHM_LEN, out, &len) == out);
			CHECK_EQ(len, SHM_LEN);
			CHECK(!strcmp(out, buf + i * SHM_LEN));
		}
		CHECK_OK(fi_av_remove(av, &fa[1], 1, 0));
		len = sizeof out;
		CHECK_EQ(fi_av_lookup(av, fa[1], out, &len), -FI_EINVAL);
		CHECK_EQ(fi_av_remove(av, &fa[1], 1, 0), -FI_EINVAL);
		len = sizeof out;
		CHECK_OK(fi_av_lookup(av, fa[0], out, &len));
		CHECK_OK(fi_av_lookup(av, fa[2], out, &len));
		/* removal then re-insertion is allowed; slots are not reused */
		CHECK_EQ(fi_av_insert(av, buf + SHM_LEN, 1, &fa[3], 0, NULL), 1);
		CHECK(fa[3] != fa[1] && fa[3] != fa[0] && fa[3] != fa[2]);
		if (types[t] == FI_AV_TABLE)
			CHECK_EQ(fa[3], 3);
		CHECK_OK(fi_close(&av->fid));
	}
	CHECK_OK(close_dom());
}

TEST(shm_bad_addresses)
{
	struct fid_av *av;
	char buf[512];
	size_t off = 0;
	fi_addr_t fa[8];
	CHECK_OK(open_dom("shm", FI_ADDR_STR));
	CHECK_OK(open_av(FI_AV_TABLE, 0, &av));
#define PUT(s) do { memcpy(buf + off, s, strlen(s) + 1); off += strlen(s) + 1; } while (0)
	char good[SHM_LEN];
	shm_name(0x77, good);
	PUT("garbage");
	PUT(good);
	PUT("fi_shm://0000000000000001");           /* other provider's format */
	PUT("fi_rustfab_shm://12");                 /* truncated */
	PUT("fi_rustfab_shm://zzzzzzzzzzzzzzzz");   /* not hex */
	PUT("fi_sockaddr_in://127.0.0.1:80");       /* wrong transport */
	PUT("fi_rustfab_shm://0000000000000000");   /* token 0: no endpoint */
	PUT(good);
#undef PUT
	for (int i = 0; i < 8; i++)
		fa[i] = 12345;
	CHECK_EQ(fi_av_insert(av, buf, 8, fa, 0, NULL), 2);
	CHECK_EQ(fa[0], FI_ADDR_NOTAVAIL);
	CHECK_EQ(fa[1], 0);
	for (int i = 2; i < 7; i++)
		CHECK_EQ(fa[i], FI_ADDR_NOTAVAIL);
	CHECK_EQ(fa[7], 1); /* TABLE: consecutive among the good ones */
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

TEST(shm_insertsvc_and_insertsym)
{
	struct fid_av *av;
	char out[64], want[SHM_LEN];
	size_t len;
	fi_addr_t fa[8];
	CHECK_OK(open_dom("shm", FI_ADDR_STR));
	CHECK_OK(open_av(FI_AV_TABLE, 0, &av));
	/* the same node/service mapping fi_getinfo uses */
	CHECK_EQ(fi_av_insertsvc(av, "127.0.0.1", "9228", &fa[0], 0, NULL), 1);
	len = sizeof out;
	CHECK_OK(fi_av_lookup(av, fa[0], out, &len));
	shm_name(shm_token_for("127.0.0.1", "9228"), want);
	CHECK(!strcmp(out, want));
	/* an FI_ADDR_STR address as node, service NULL */
	shm_name(0xabcdef, want);
	CHECK_EQ(fi_av_insertsvc(av, want, NULL, &fa[1], 0, NULL), 1);
	len = sizeof out;
	CHECK_OK(fi_av_lookup(av, fa[1], out, &len));
	CHECK(!strcmp(out, want));
	/* host10:5000, host10:5001, host11:5000, host11:5001 */
	CHECK_EQ(fi_av_insertsym(av, "host10", 2, "5000", 2, &fa[2], 0, NULL), 4);
	const char *nodes[] = {"host10", "host10", "host11", "host11"};
	const char *svcs[] = {"5000", "5001", "5000", "5001"};
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(fa[2 + i], 2 + i);
		len = sizeof out;
		CHECK_OK(fi_av_lookup(av, fa[2 + i], out, &len));
		shm_name(shm_token_for(nodes[i], svcs[i]), want);
		CHECK(!strcmp(out, want));
	}
	CHECK_EQ(fi_av_insertsym(av, "host", 2, "5000", 1, fa, 0, NULL), -FI_EINVAL);
	CHECK_EQ(fi_av_insertsym(av, "host1", 1, "svc", 2, fa, 0, NULL), -FI_EINVAL);
	CHECK_EQ(fi_av_insertsym(av, "host1", 0, "1", 1, fa, 0, NULL), 0);
	CHECK_EQ(fi_av_insertsvc(av, NULL, "1", fa, 0, NULL), -FI_EINVAL);
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

/* ---------------------------------------------------------------- tcp */

TEST(tcp_insert_lookup_straddr_in)
{
	CHECK_OK(open_dom("tcp", FI_SOCKADDR_IN));
	for (int t = 0; t < 2; t++) {
		struct fid_av *av;
		struct sockaddr_in a[3] = {sin4("127.0.0.1", 9228), sin4("10.0.0.2", 1), sin4("192.168.1.7", 65535)};
		struct sockaddr_in out;
		char str[64];
		fi_addr_t fa[3];
		size_t len;
		CHECK_OK(open_av(types[t], 0, &av));
		CHECK_EQ(fi_av_insert(av, a, 3, fa, 0, NULL), 3);
		for (int i = 0; i < 3; i++) {
			if (types[t] == FI_AV_TABLE)
				CHECK_EQ(fa[i], i);
			len = sizeof out;
			CHECK_OK(fi_av_lookup(av, fa[i], &out, &len));
			CHECK_EQ(len, sizeof(struct sockaddr_in));
			CHECK(!memcmp(&out, &a[i], sizeof out));
		}
		len = sizeof str;
		CHECK(fi_av_straddr(av, &a[0], str, &len) == str);
		CHECK(!strcmp(str, "fi_sockaddr_in://127.0.0.1:9228"));
		CHECK_EQ(len, strlen(str) + 1);
		CHECK_OK(fi_av_remove(av, fa, 3, 0));
		len = sizeof out;
		CHECK_EQ(fi_av_lookup(av, fa[0], &out, &len), -FI_EINVAL);
		CHECK_OK(fi_close(&av->fid));
	}
	CHECK_OK(close_dom());
}

TEST(tcp_insert_in6_and_sockaddr)
{
	struct fid_av *av;
	struct sockaddr_in6 a6[2] = {sin6("::1", 9228), sin6("fe80::1", 80)};
	struct sockaddr_in6 out6;
	char str[80];
	fi_addr_t fa[2];
	size_t len;
	CHECK_OK(open_dom("tcp", FI_SOCKADDR_IN6));
	CHECK_OK(open_av(FI_AV_MAP, 0, &av));
	CHECK_EQ(fi_av_insert(av, a6, 2, fa, 0, NULL), 2);
	len = sizeof out6;
	CHECK_OK(fi_av_lookup(av, fa[1], &out6, &len));
	CHECK_EQ(len, sizeof out6);
	CHECK(!memcmp(&out6.sin6_addr, &a6[1].sin6_addr, 16));
	CHECK_EQ(out6.sin6_port, a6[1].sin6_port);
	len = sizeof str;
	CHECK(fi_av_straddr(av, &a6[0], str, &len) == str);
	CHECK(!strcmp(str, "fi_sockaddr_in6://[::1]:9228"));
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());

	/* FI_SOCKADDR (what fabtests' av_test asks for): slot size from the
	 * first entry's family */
	struct sockaddr_in a4[2] = {sin4("10.1.1.1", 9), sin4("10.1.1.2", 9)};
	CHECK_OK(open_dom("tcp", FI_SOCKADDR));
	CHECK_OK(open_av(FI_AV_TABLE, 0, &av));
	CHECK_EQ(fi_av_insert(av, a4, 2, fa, 0, NULL), 2);
	CHECK_EQ(fi_av_insert(av, a6, 2, fa, 0, NULL), 2);
	CHECK_EQ(fa[1], 3);
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

TEST(tcp_bad_addresses)
{
	struct fid_av *av;
	struct sockaddr_in a[5];
	fi_addr_t fa[5];
	CHECK_OK(open_dom("tcp", FI_SOCKADDR_IN));
	CHECK_OK(open_av(FI_AV_MAP, 0, &av));
	a[0] = sin4("10.0.0.1", 9);
	memset(&a[1], 0, sizeof a[1]);   /* fabtests' "invalid address": all zero */
	a[2] = sin4("10.0.0.1", 0);      /* port 0 */
	a[3] = sin4("0.0.0.0", 9);       /* unspecified */
	memset(&a[4], 0xff, sizeof a[4]); /* garbage family */
	for (int i = 0; i < 5; i++)
		fa[i] = 7;
	CHECK_EQ(fi_av_insert(av, a, 5, fa, 0, NULL), 1);
	CHECK(fa[0] != FI_ADDR_NOTAVAIL);
	for (int i = 1; i < 5; i++)
		CHECK_EQ(fa[i], FI_ADDR_NOTAVAIL);
	/* an IPv6 address in an FI_SOCKADDR_IN domain */
	struct sockaddr_in6 s6[2] = {sin6("::1", 1), sin6("::1", 1)};
	CHECK_EQ(fi_av_insert(av, s6, 1, fa, 0, NULL), 0);
	CHECK_EQ(fa[0], FI_ADDR_NOTAVAIL);
	/* a shm name in a tcp AV */
	char name[SHM_LEN];
	shm_name(5, name);
	CHECK_EQ(fi_av_insert(av, name, 1, fa, 0, NULL), 0);
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

TEST(tcp_insertsvc_and_insertsym)
{
	struct fid_av *av;
	struct sockaddr_in out;
	fi_addr_t fa[8];
	size_t len;
	CHECK_OK(open_dom("tcp", FI_SOCKADDR_IN));
	CHECK_OK(open_av(FI_AV_TABLE, 0, &av));
	CHECK_EQ(fi_av_insertsvc(av, "127.0.0.1", "9228", &fa[0], 0, NULL), 1);
	len = sizeof out;
	CHECK_OK(fi_av_lookup(av, fa[0], &out, &len));
	struct sockaddr_in want = sin4("127.0.0.1", 9228);
	CHECK(!memcmp(&out, &want, sizeof out));
	CHECK_EQ(fi_av_insertsvc(av, "localhost", "9229", &fa[1], 0, NULL), 1);
	len = sizeof out;
	CHECK_OK(fi_av_lookup(av, fa[1], &out, &len));
	CHECK_EQ(ntohs(out.sin_port), 9229);
	/* fi_av(3) example: 10.1.1.1:5000, :5001, 10.1.1.2:5000, :5001 */
	CHECK_EQ(fi_av_insertsym(av, "10.1.1.1", 2, "5000", 2, &fa[2], 0, NULL), 4);
	const char *ips[] = {"10.1.1.1", "10.1.1.1", "10.1.1.2", "10.1.1.2"};
	uint16_t ports[] = {5000, 5001, 5000, 5001};
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(fa[2 + i], 2 + i);
		len = sizeof out;
		CHECK_OK(fi_av_lookup(av, fa[2 + i], &out, &len));
		want = sin4(ips[i], ports[i]);
		CHECK(!memcmp(&out, &want, sizeof out));
	}
	/* a name that does not resolve fails its entry, not the call */
	fa[0] = 0;
	CHECK_EQ(fi_av_insertsvc(av, "no-such-host.invalid", "1", &fa[0], 0, NULL), 0);
	CHECK_EQ(fa[0], FI_ADDR_NOTAVAIL);
	CHECK_EQ(fi_av_insertsym(av, "10.1.1.1", 1, "65535", 2, fa, 0, NULL), -FI_EINVAL);
	CHECK_EQ(fi_av_insertsym(av, "255.255.255.255", 2, "1", 1, fa, 0, NULL), -FI_EINVAL);
	CHECK_EQ(fi_av_insertsym(av, "10.0.0.1", SIZE_MAX, "1", 2, fa, 0, NULL), -FI_EINVAL);
	CHECK_EQ(fi_av_insertsym(av, NULL, 1, "1", 1, fa, 0, NULL), -FI_EINVAL);
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

/* ------------------------------------------------------ shared rules */

TEST(table_indices_with_null_fi_addr)
{
	struct fid_av *av;
	char buf[6 * SHM_LEN], out[64];
	fi_addr_t fa;
	size_t len;
	CHECK_OK(open_dom("shm", FI_ADDR_STR));
	CHECK_OK(open_av(FI_AV_TABLE, 0, &av));
	pack_shm(buf, 1, 6);
	/* "Because insertions occur at a pre-determined index, the fi_addr
	 * parameter may be NULL." */
	CHECK_EQ(fi_av_insert(av, buf, 5, NULL, 0, NULL), 5);
	CHECK_EQ(fi_av_insert(av, buf + 5 * SHM_LEN, 1, &fa, FI_MORE, NULL), 1);
	CHECK_EQ(fa, 5);
	for (int i = 0; i < 6; i++) {
		len = sizeof out;
		CHECK_OK(fi_av_lookup(av, i, out, &len));
		CHECK(!strcmp(out, buf + i * SHM_LEN));
	}
	/* MPI-style: duplicates still get the next index */
	CHECK_EQ(fi_av_insert(av, buf, 2, NULL, 0, NULL), 2);
	len = sizeof out;
	CHECK_OK(fi_av_lookup(av, 7, out, &len));
	CHECK(!strcmp(out, buf + SHM_LEN));
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

TEST(lookup_truncation_rule)
{
	struct fid_av *av;
	char name[SHM_LEN], out[64];
	fi_addr_t fa;
	size_t len;
	CHECK_OK(open_dom("shm", FI_ADDR_STR));
	CHECK_OK(open_av(FI_AV_MAP, 0, &av));
	shm_name(0x4242, name);
	CHECK_EQ(fi_av_insert(av, name, 1, &fa, 0, NULL), 1);
	/* size query */
	len = 0;
	CHECK_OK(fi_av_lookup(av, fa, NULL, &len));
	CHECK_EQ(len, SHM_LEN);
	/* truncated: returns 0, copies what fits, *addrlen = needed */
	memset(out, 'X', sizeof out);
	len = 10;
	CHECK_OK(fi_av_lookup(av, fa, out, &len));
	CHECK_EQ(len, SHM_LEN);
	CHECK(!memcmp(out, name, 9));
	CHECK_EQ(out[9], 0); /* a truncated string stays terminated */
	CHECK_EQ(out[10], 'X');
	/* exact size */
	len = SHM_LEN;
	CHECK_OK(fi_av_lookup(av, fa, out, &len));
	CHECK(!strcmp(out, name));
	/* bad arguments */
	CHECK_EQ(fi_av_lookup(av, fa, out, NULL), -FI_EINVAL);
	len = 8;
	CHECK_EQ(fi_av_lookup(av, fa, NULL, &len), -FI_EINVAL);
	CHECK_EQ(fi_av_lookup(av, fa + 1000, out, &len), -FI_EINVAL);
	CHECK_EQ(fi_av_lookup(av, FI_ADDR_NOTAVAIL, out, &len), -FI_EINVAL);
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());

	/* binary addresses are cut at the buffer size */
	struct sockaddr_in a = sin4("1.2.3.4", 5);
	unsigned char b[16];
	CHECK_OK(open_dom("tcp", FI_SOCKADDR_IN));
	CHECK_OK(open_av(FI_AV_MAP, 0, &av));
	CHECK_EQ(fi_av_insert(av, &a, 1, &fa, 0, NULL), 1);
	memset(b, 0xee, sizeof b);
	len = 4;
	CHECK_OK(fi_av_lookup(av, fa, b, &len));
	CHECK_EQ(len, sizeof a);
	CHECK(!memcmp(b, &a, 4));
	CHECK_EQ(b[4], 0xee);
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

TEST(straddr_rules)
{
	struct fid_av *av;
	char name[SHM_LEN], out[64];
	size_t len;
	CHECK_OK(open_dom("shm", FI_ADDR_STR));
	CHECK_OK(open_av(FI_AV_TABLE, 0, &av));
	shm_name(0x99, name);
	/* the address need not be inserted */
	len = 8;
	memset(out, 'X', sizeof out);
	CHECK(fi_av_straddr(av, name, out, &len) == out);
	CHECK_EQ(len, SHM_LEN);
	CHECK_EQ(strlen(out), 7);
	CHECK(!strncmp(out, name, 7));
	len = 0;
	CHECK(fi_av_straddr(av, name, NULL, &len) == NULL);
	CHECK_EQ(len, SHM_LEN);
	len = sizeof out;
	CHECK(fi_av_straddr(av, "not an address", out, &len) == NULL);
	CHECK(fi_av_straddr(av, NULL, out, &len) == NULL);
	CHECK(fi_av_straddr(av, name, out, NULL) == NULL);
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

TEST(insert_flags_sync_err_user_id)
{
	struct fid_av *av;
	char buf[2 * SHM_LEN];
	int sync_err[2];
	fi_addr_t fa[2];
	CHECK_OK(open_dom("shm", FI_ADDR_STR));
	CHECK_OK(open_av(FI_AV_TABLE, 0, &av));
	shm_name(1, buf);
	memcpy(buf + SHM_LEN, "garbage", 8);
	/* fabtests av_goodbad_vector_sync_err */
	sync_err[0] = -1;
	sync_err[1] = 0;
	CHECK_EQ(fi_av_insert(av, buf, 2, NULL, FI_SYNC_ERR, sync_err), 1);
	CHECK_EQ(sync_err[0], 0);
	CHECK(sync_err[1] > 0);
	CHECK_EQ(fi_av_insert(av, buf, 2, NULL, FI_SYNC_ERR, NULL), -FI_EINVAL);
	/* FI_AV_USER_ID: fi_addr is input (ids) and output (indices) */
	fa[0] = 1000;
	fa[1] = 2000;
	CHECK_EQ(fi_av_insert(av, buf, 1, fa, FI_AV_USER_ID, NULL), 1);
	CHECK_EQ(fa[0], 1);
	CHECK_EQ(fi_av_insert(av, buf, 1, NULL, FI_AV_USER_ID, NULL), -FI_EINVAL);
	CHECK_EQ(fi_av_insert(av, buf, 1, fa, FI_TRANSMIT_COMPLETE, NULL), -FI_EBADFLAGS);
	CHECK_EQ(fi_av_insertsvc(av, "a", "1", fa, 1ULL << 40, NULL), -FI_EBADFLAGS);
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

TEST(async_av_needs_eq)
{
	struct fid_av *av;
	struct fid_eq *eq = NULL;
	struct fi_eq_attr eq_attr = {0};
	char buf[2 * SHM_LEN];
	fi_addr_t fa[2];
	uint32_t ctx, event;
	struct fi_eq_entry entry;
	struct fi_eq_err_entry err;
	int ret;

	CHECK_OK(open_dom("shm", FI_ADDR_STR));
	CHECK_OK(open_av(FI_AV_TABLE, FI_EVENT, &av));
	shm_name(3, buf);
	memcpy(buf + SHM_LEN, "garbage", 8);
	/* "any insertions attempted before an EQ is bound to the AV will fail
	 * with -FI_ENOEQ" */
	CHECK_EQ(fi_av_insert(av, buf, 1, fa, 0, &ctx), -FI_ENOEQ);
	CHECK_EQ(fi_av_insertsvc(av, "a", "1", fa, 0, &ctx), -FI_ENOEQ);

	eq_attr.wait_obj = FI_WAIT_UNSPEC;
	ret = fi_eq_open(fab, &eq_attr, &eq, NULL);
	if (ret == -FI_ENOSYS) {
		printf("    skipped: fi_eq_open not implemented in this build; "
		       "asynchronous insert checks run once EQs exist\n");
		CHECK_OK(fi_close(&av->fid));
		CHECK_OK(close_dom());
		return;
	}
	CHECK_OK(ret);
	CHECK_EQ(fi_av_bind(av, &eq->fid, 1), -FI_EINVAL);
	CHECK_OK(fi_av_bind(av, &eq->fid, 0));
	CHECK_EQ(fi_av_bind(av, &eq->fid, 0), -FI_EBUSY);
	/* the EQ is in use while bound */
	CHECK_EQ(fi_close(&eq->fid), -FI_EBUSY);
	CHECK_EQ(fi_av_insert(av, buf, 2, NULL, FI_SYNC_ERR, &ret), -FI_EBADFLAGS);

	/* fabtests av_goodbad_vector_async: error for index 1, then completion */
	fa[0] = fa[1] = 0;
	CHECK_EQ(fi_av_insert(av, buf, 2, fa, 0, &ctx), 0);
	CHECK_EQ(fa[0], 0);
	CHECK_EQ(fa[1], FI_ADDR_NOTAVAIL);
	CHECK_EQ(fi_eq_sread(eq, &event, &entry, sizeof entry, 2000, 0), -FI_EAVAIL);
	memset(&err, 0, sizeof err);
	CHECK_EQ(fi_eq_readerr(eq, &err, 0), sizeof err);
	CHECK(err.fid == &av->fid);
	CHECK(err.context == &ctx);
	CHECK_EQ(err.data, 1);
	CHECK(err.err > 0);
	CHECK_EQ(fi_eq_sread(eq, &event, &entry, sizeof entry, 2000, 0), sizeof entry);
	CHECK_EQ(event, FI_AV_COMPLETE);
	CHECK(entry.fid == &av->fid);
	CHECK(entry.context == &ctx);
	CHECK_EQ(entry.data, 1);

	/* fabtests av_zero_async */
	CHECK_EQ(fi_av_insert(av, NULL, 0, fa, 0, &ctx), 0);
	CHECK_EQ(fi_eq_sread(eq, &event, &entry, sizeof entry, 2000, 0), sizeof entry);
	CHECK_EQ(event, FI_AV_COMPLETE);
	CHECK_EQ(entry.data, 0);

	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(fi_close(&eq->fid));
	CHECK_OK(close_dom());
}

TEST(busy_rules)
{
	struct fid_av *av;
	CHECK_OK(open_dom("tcp", FI_SOCKADDR_IN));
	CHECK_OK(open_av(FI_AV_MAP, 0, &av));
	/* "All objects associated with the opened domain must be released
	 * prior to calling fi_close, otherwise the call will return -FI_EBUSY." */
	CHECK_EQ(fi_close(&dom->fid), -FI_EBUSY);
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

TEST(null_and_invalid_arguments)
{
	struct fid_av *av;
	struct fid_av *fake;
	char name[SHM_LEN], out[64];
	fi_addr_t fa[2] = {0, 0};
	size_t len = sizeof out;
	struct fi_av_set_attr set_attr = {0};
	struct fid_av_set *set;
	struct fid_wait *w;

	CHECK_OK(open_dom("shm", FI_ADDR_STR));
	fake = (struct fid_av *)dom;
	CHECK_OK(open_av(FI_AV_TABLE, 0, &av));
	shm_name(8, name);
	CHECK_EQ(fi_av_insert(av, NULL, 1, fa, 0, NULL), -FI_EINVAL);
	CHECK_EQ(fi_av_insert(av, NULL, 0, fa, 0, NULL), 0);
	CHECK_EQ(fi_av_insert(av, name, SIZE_MAX, fa, 0, NULL), -FI_EINVAL);
	CHECK_EQ(fi_av_insert(av, name, (size_t)INT32_MAX + 1, fa, 0, NULL), -FI_EINVAL);
	CHECK_EQ(fi_av_remove(av, NULL, 1, 0), -FI_EINVAL);
	CHECK_EQ(fi_av_remove(av, NULL, 0, 0), 0);
	CHECK_EQ(fi_av_insert(av, name, 1, fa, 0, NULL), 1);
	CHECK_EQ(fi_av_remove(av, fa, 1, 1), -FI_EINVAL);
	CHECK_EQ(fi_av_remove(av, fa, SIZE_MAX, 0), -FI_EINVAL);
	CHECK_EQ(fi_av_bind(av, NULL, 0), -FI_EINVAL);
	CHECK_EQ(fi_av_bind(av, &dom->fid, 0), -FI_EINVAL);
	CHECK_EQ(fi_av_set(av, &set_attr, &set, NULL), -FI_ENOSYS);
	CHECK_EQ(fi_control(&av->fid, FI_GETWAIT, &w), -FI_ENOSYS);
	CHECK_EQ(fi_open_ops(&av->fid, "x", 0, (void **)&w, NULL), -FI_ENOSYS);
	CHECK_EQ(fi_av_insertsvc(av, "n", NULL, fa, 0, NULL), 1);
	/* a foreign object in the AV slots (wrong class) is rejected */
	CHECK_EQ(av->ops->insert(fake, name, 1, fa, 0, NULL), -FI_EINVAL);
	CHECK_EQ(av->ops->lookup(fake, 0, out, &len), -FI_EINVAL);
	CHECK_EQ(av->ops->remove(fake, fa, 1, 0), -FI_EINVAL);
	CHECK_EQ(av->ops->insertsvc(fake, "a", "b", fa, 0, NULL), -FI_EINVAL);
	CHECK_EQ(av->ops->insertsym(fake, "a", 1, "b", 1, fa, 0, NULL), -FI_EINVAL);
	CHECK(av->ops->straddr(fake, name, out, &len) == NULL);
	/* the AV's close slot must not close a domain */
	CHECK_EQ(av->fid.ops->close(&dom->fid), -FI_EINVAL);
	CHECK_EQ(av->fid.ops->bind(&dom->fid, &av->fid, 0), -FI_EINVAL);
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(close_dom());
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(av_open_close_all_types);
	RUN(av_open_bad_attributes);
	RUN(shm_insert_lookup_remove);
	RUN(shm_bad_addresses);
	RUN(shm_insertsvc_and_insertsym);
	RUN(tcp_insert_lookup_straddr_in);
	RUN(tcp_insert_in6_and_sockaddr);
	RUN(tcp_bad_addresses);
	RUN(tcp_insertsvc_and_insertsym);
	RUN(table_indices_with_null_fi_addr);
	RUN(lookup_truncation_rule);
	RUN(straddr_rules);
	RUN(insert_flags_sync_err_user_id);
	RUN(async_av_needs_eq);
	RUN(busy_rules);
	RUN(null_and_invalid_arguments);
	return harness_done();
}
