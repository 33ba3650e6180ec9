/*
 * Named (shared) address vectors (fi_av(3): name, FI_READ, map_addr) over
 * RF_TRANSPORT=shm|tcp|auto: one process creates a named AV and inserts, a
 * forked child opens it with FI_READ and sends to the creator's endpoints
 * with the fi_addr_t values it reads at map_addr; the payloads are checked
 * on arrival, and a reply's source (FI_SOURCE) in the child is the
 * creator's fi_addr_t for the replying endpoint. Also: the open errors, and a corrupted segment entry (a
 * same-user process may write the segment) failing only that entry.
 */
#include "rdm_common.h"
#include <fcntl.h>
#include <netinet/in.h>

#define MSG_LEN 64

struct node {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq, *rcq; /* transmit, receive */
	struct fid_ep *ep[2];
	char addr[2][128];
};

static char av_name[64];

static void new_name(const char *tag)
{
	static int n;
	snprintf(av_name, sizeof(av_name), "rftest-%s-%d-%d", tag, (int)getpid(), n++);
}

static int node_open(struct node *nd)
{
	memset(nd, 0, sizeof(*nd));
	nd->info = rf_getinfo(rf_transport(), FI_EP_RDM, FI_MSG | FI_SOURCE | FI_SHARED_AV);
	if (!nd->info)
		return -FI_ENODATA;
	int ret = fi_fabric(nd->info->fabric_attr, &nd->fabric, NULL);
	if (!ret)
		ret = fi_domain(nd->fabric, nd->info, &nd->domain, NULL);
	return ret;
}

static int av_open_named(struct node *nd, uint64_t flags, void **map_addr)
{
	struct fi_av_attr attr = {0};
	attr.type = FI_AV_TABLE;
	attr.name = av_name;
	attr.flags = flags;
	int ret = fi_av_open(nd->domain, &attr, &nd->av, NULL);
	if (map_addr)
		*map_addr = attr.map_addr;
	return ret;
}

/* `n` endpoints bound to the node's AV and CQs, enabled, 8 receives each. */
static int eps_open(struct node *nd, int n, char rx[2][8][MSG_LEN])
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .size = 64};
	int ret = fi_cq_open(nd->domain, &cq_attr, &nd->cq, NULL);
	if (!ret)
		ret = fi_cq_open(nd->domain, &cq_attr, &nd->rcq, NULL);
	for (int i = 0; i < n && !ret; i++) {
		size_t len = sizeof(nd->addr[i]);
		if ((ret = fi_endpoint(nd->domain, nd->info, &nd->ep[i], NULL)) ||
		    (ret = fi_ep_bind(nd->ep[i], &nd->av->fid, 0)) ||
		    (ret = fi_ep_bind(nd->ep[i], &nd->cq->fid, FI_TRANSMIT)) ||
		    (ret = fi_ep_bind(nd->ep[i], &nd->rcq->fid, FI_RECV)) ||
		    (ret = fi_enable(nd->ep[i])) || (ret = fi_getname(&nd->ep[i]->fid, nd->addr[i], &len)))
			return ret;
		for (int k = 0; rx && k < 8 && !ret; k++)
			ret = (int)fi_recv(nd->ep[i], rx[i][k], MSG_LEN, NULL, FI_ADDR_UNSPEC, rx[i][k]);
	}
	return ret;
}

static void node_close(struct node *nd)
{
	for (int i = 0; i < 2; i++)
		if (nd->ep[i])
			fi_close(&nd->ep[i]->fid);
	if (nd->cq)
		fi_close(&nd->cq->fid);
	if (nd->rcq)
		fi_close(&nd->rcq->fid);
	if (nd->av)
		fi_close(&nd->av->fid);
	if (nd->domain)
		fi_close(&nd->domain->fid);
	if (nd->fabric)
		fi_close(&nd->fabric->fid);
	if (nd->info)
		fi_freeinfo(nd->info);
	memset(nd, 0, sizeof(*nd));
}

/* One completion within 10 s (scaled), with its source; 0 or the error. */
static int sav_wait_from(struct fid_cq *cq, struct fi_cq_data_entry *out, fi_addr_t *src)
{
	double end = now_sec() + 10 * rf_time_scale();
	while (now_sec() < end) {
		ssize_t r = fi_cq_readfrom(cq, out, 1, src);
		if (r == 1)
			return 0;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			return -err.err;
		}
		if (r != -FI_EAGAIN)
			return (int)r;
	}
	return -FI_ETIMEDOUT;
}

static int sav_wait_comp(struct fid_cq *cq, struct fi_cq_data_entry *out)
{
	fi_addr_t src;
	return sav_wait_from(cq, out, &src);
}

static int send_text(struct node *nd, int ep, fi_addr_t to, const char *text)
{
	static char buf[MSG_LEN];
	snprintf(buf, sizeof(buf), "%s", text);
	int ret;
	double end = now_sec() + 10 * rf_time_scale();
	do {
		ret = (int)fi_send(nd->ep[ep], buf, MSG_LEN, NULL, to, NULL);
		if (ret == -FI_EAGAIN) {
			struct fi_cq_data_entry c;
			fi_cq_read(nd->cq, &c, 1);
		}
	} while (ret == -FI_EAGAIN && now_sec() < end);
	if (ret)
		return ret;
	struct fi_cq_data_entry c;
	return sav_wait_comp(nd->cq, &c);
}

static int wait_byte(int fd)
{
	char c = 0;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, (int)(20000 * rf_time_scale())) != 1 || read(fd, &c, 1) != 1)
		return -1;
	return c;
}

/*
 * The child: opens the named AV with FI_READ once told the creator made it,
 * reports with its endpoint's address, waits for the inserts, then sends
 * "to-<i>" to map_addr[i] for i < n (expecting -FI_EINVAL from fi_send
 * for the index `bad`); before the sends it receives "back" from the
 * creator's entry 1 and checks that FI_SOURCE reports it as fi_addr 1.
 * Exit code: 0, or the step that failed.
 */
static int child_main(int go_fd, int ready_fd, int n, int bad)
{
	struct node nd;
	static char rx[2][8][MSG_LEN];
	void *map = NULL;
	if (wait_byte(go_fd) != 'c' || node_open(&nd) || av_open_named(&nd, FI_READ, &map) || !map)
		return 10;
	if (eps_open(&nd, 1, rx))
		return 11;
	if (write(ready_fd, "r", 1) != 1 || write(ready_fd, nd.addr[0], sizeof(nd.addr[0])) != sizeof(nd.addr[0]) ||
	    wait_byte(go_fd) != 'i')
		return 12;
	/* First the creator's message: its source is found by a reverse
	 * lookup before this process looked anything up. */
	struct fi_cq_data_entry c;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	if (sav_wait_from(nd.rcq, &c, &src) || strcmp(c.op_context, "back"))
		return 14;
	if (src != 1)
		return 15;
	const fi_addr_t *fa = map;
	for (int i = 0; i < n; i++) {
		char text[16];
		snprintf(text, sizeof(text), "to-%d", i);
		int ret = send_text(&nd, 0, fa[i], text);
		if (i == bad) {
			char a[128];
			size_t len = sizeof(a);
			if (ret != -FI_EINVAL || fi_av_lookup(nd.av, fa[i], a, &len) != -FI_EINVAL)
				return 20 + i;
		} else if (ret) {
			return 30 + i;
		}
	}
	/* A read-only AV takes no inserts. */
	fi_addr_t out;
	if (fi_av_insert(nd.av, nd.addr[0], 1, &out, 0, NULL) != -FI_EINVAL)
		return 13;
	node_close(&nd);
	return 0;
}

/* Where entry `i` of a named AV of capacity 1024 (the least one gets)
 * starts in its shm object (docs/av.md, "Shared AVs": 64-byte header, the
 * map array, then 128-byte entries). */
static off_t entry_offset(int i)
{
	return (64 + 8 * 1024 + 63) / 64 * 64 + (off_t)i * 128;
}

/*
 * The creator (this process) makes the named AV and two endpoints bound to
 * it; the child opens it read-only before anything is inserted; then the
 * creator inserts ep[1] and ep[0] (fi_addr 0 and 1) and the child sends
 * "to-0" and "to-1" at map_addr[0] and [1]: ep[1] must receive "to-0" and
 * ep[0] "to-1". With `corrupt`, entry 0 is overwritten in the segment
 * first: the child's send to it fails with -FI_EINVAL, and only that one.
 */
static void share_and_send(int corrupt)
{
	struct node nd = {0};
	static char rx[2][8][MSG_LEN];
	int go[2], ready[2];
	void *map = NULL;
	new_name(corrupt ? "bad" : "ok");
	CHECK(pipe(go) == 0 && pipe(ready) == 0);
	pid_t pid = rf_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(go[1]);
		close(ready[0]);
		_exit(child_main(go[0], ready[1], 2, corrupt ? 0 : -1));
	}
	close(go[0]);
	close(ready[1]);
	int st = -1;
	CHECK_OK(node_open(&nd));
	CHECK_OK(av_open_named(&nd, 0, &map));
	CHECK(map != NULL);
	memset(rx, 0, sizeof(rx));
	CHECK_OK(eps_open(&nd, 2, rx));
	CHECK(write(go[1], "c", 1) == 1);
	CHECK_EQ(wait_byte(ready[0]), 'r');
	char child_addr[128];
	CHECK_EQ(read(ready[0], child_addr, sizeof(child_addr)), (ssize_t)sizeof(child_addr));
	/* ep[1], ep[0] and the child's endpoint get fi_addr 0, 1 and 2. */
	const char *order[3] = {nd.addr[1], nd.addr[0], child_addr};
	char all[3 * 128];
	size_t off = 0;
	int tcp = strncmp(nd.addr[0], "fi_", 3) != 0; /* sockaddr_in, else strings */
	for (int i = 0; i < 3; i++) {
		size_t len = tcp ? sizeof(struct sockaddr_in) : strlen(order[i]) + 1;
		memcpy(all + off, order[i], len);
		off += len;
	}
	fi_addr_t fa[3];
	CHECK_EQ(fi_av_insert(nd.av, all, 3, fa, 0, NULL), 3);
	CHECK_EQ(fa[0], 0);
	CHECK_EQ(fa[1], 1);
	CHECK_EQ(fa[2], 2);
	CHECK_EQ(((fi_addr_t *)map)[1], 1);
	if (corrupt) {
		char path[128], junk[128];
		snprintf(path, sizeof(path), "/dev/shm/rustfab-av-%u-%s", (unsigned)geteuid(), av_name);
		int fd = open(path, O_RDWR);
		CHECK(fd >= 0);
		memset(junk, 0xa5, sizeof(junk));
		CHECK_EQ(pwrite(fd, junk, sizeof(junk), entry_offset(0)), (ssize_t)sizeof(junk));
		close(fd);
	}
	CHECK(write(go[1], "i", 1) == 1);
	/* The message the child checks the source of. */
	CHECK_OK(send_text(&nd, 0, fa[2], "back"));
	/* ep[1] got "to-0" (unless entry 0 was corrupted), ep[0] "to-1". */
	int want = corrupt ? 1 : 2;
	for (int got = 0; got < want; got++) {
		struct fi_cq_data_entry c;
		CHECK_OK(sav_wait_comp(nd.rcq, &c));
		CHECK(c.flags & FI_RECV);
		const char *b = c.op_context;
		int ep = b >= rx[1][0] ? 1 : 0;
		CHECK_EQ(c.len, MSG_LEN);
		CHECK(!strcmp(b, ep == 1 ? "to-0" : "to-1"));
		CHECK(!corrupt || ep == 0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	/* fi_av_remove is not offered on a shared AV. */
	CHECK_EQ(fi_av_remove(nd.av, fa, 1, 0), -FI_ENOSYS);
	close(go[1]);
	close(ready[0]);
	node_close(&nd);
}

TEST(shared_av_two_processes)
{
	share_and_send(0);
}

TEST(shared_av_corrupt_entry_fails_only_itself)
{
	share_and_send(1);
}

TEST(shared_av_open_errors)
{
	struct node a = {0}, b = {0};
	struct fi_av_attr attr = {0};
	struct fid_av *av = NULL;
	void *map = NULL;
	CHECK_OK(node_open(&a));
	CHECK_OK(node_open(&b));
	new_name("err");
	/* FI_READ: the AV must be named, and must exist. */
	attr.flags = FI_READ;
	CHECK_EQ(fi_av_open(a.domain, &attr, &av, NULL), -FI_EINVAL);
	CHECK_EQ(av_open_named(&a, FI_READ, NULL), -FI_ENOENT);
	/* A name that cannot name a file. */
	attr.name = "a/b";
	attr.flags = 0;
	CHECK_EQ(fi_av_open(a.domain, &attr, &av, NULL), -FI_EINVAL);
	/* One creator at a time; readers any number. */
	CHECK_OK(av_open_named(&a, 0, &map));
	CHECK(map != NULL);
	CHECK_EQ(av_open_named(&b, 0, NULL), -FI_EBUSY);
	CHECK_OK(av_open_named(&b, FI_READ, NULL));
	CHECK_OK(fi_close(&b.av->fid));
	b.av = NULL;
	/* The creator's close removes the name. */
	CHECK_OK(fi_close(&a.av->fid));
	a.av = NULL;
	CHECK_EQ(av_open_named(&b, FI_READ, NULL), -FI_ENOENT);
	/* A creator that exits without closing leaves no name behind. */
	new_name("exit");
	pid_t pid = rf_fork();
	if (pid == 0) {
		struct node c;
		exit(node_open(&c) || av_open_named(&c, 0, NULL) ? 1 : 0); /* exit: atexit runs */
	}
	int st = -1;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm/rustfab-av-%u-%s", (unsigned)geteuid(), av_name);
	CHECK(access(path, F_OK) != 0);
	CHECK_EQ(av_open_named(&b, FI_READ, NULL), -FI_ENOENT);
	/* An application's own map_addr is left as it was. */
	struct fi_av_attr own = {.name = av_name, .map_addr = (void *)0x1000};
	CHECK_OK(fi_av_open(a.domain, &own, &a.av, NULL));
	CHECK(own.map_addr == (void *)0x1000);
	node_close(&a);
	node_close(&b);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(shared_av_open_errors);
	RUN(shared_av_two_processes);
	RUN(shared_av_corrupt_entry_fails_only_itself);
	return harness_done();
}
