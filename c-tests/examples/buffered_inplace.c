/*
 * buffered_inplace: process messages where the provider received them.
 *
 * With FI_BUFFERED_RECV in hints->mode the receiver posts no buffers. Every
 * message arrives as a completion whose op_context is a struct
 * fi_recv_context, whose buf is the data in the provider's buffer and whose
 * len is the message size. A small message is used in place and released
 * with FI_DISCARD; a large one (FI_MORE: buf holds only its start) is
 * claimed into the application's own buffer with FI_CLAIM.
 *
 * One process, two endpoints (a sender and a buffered receiver) over
 * rustfab's shm transport (RF_TRANSPORT=tcp for tcp). Build: cc -o
 * buffered_inplace buffered_inplace.c -lfabric; run with FI_PROVIDER_PATH
 * pointing at librustfab-fi.so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define CK(call) do { int _r = (int)(call); if (_r) { \
	fprintf(stderr, "%s: %s\n", #call, fi_strerror(-_r)); exit(1); } } while (0)

struct end { struct fid_fabric *fab; struct fid_domain *dom; struct fid_av *av;
	     struct fid_cq *cq; struct fid_ep *ep; fi_addr_t peer; };

static void open_end(struct end *e, uint64_t mode)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	const char *t = getenv("RF_TRANSPORT");
	hints->fabric_attr->prov_name = strdup("rustfab");
	hints->domain_attr->name = strdup(t ? t : "shm");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->mode = mode; /* FI_BUFFERED_RECV: "I can take provider buffers" */
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fi_av_attr av_attr = {.type = FI_AV_MAP};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA}; /* has buf and len */
	CK(fi_fabric(info->fabric_attr, &e->fab, NULL));
	CK(fi_domain(e->fab, info, &e->dom, NULL));
	CK(fi_av_open(e->dom, &av_attr, &e->av, NULL));
	CK(fi_cq_open(e->dom, &cq_attr, &e->cq, NULL));
	CK(fi_endpoint(e->dom, info, &e->ep, NULL));
	CK(fi_ep_bind(e->ep, &e->av->fid, 0));
	CK(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV));
	CK(fi_enable(e->ep));
	fi_freeinfo(hints);
	fi_freeinfo(info);
}

/* The sender is in this process too: reading its CQ moves its data. */
static struct end tx, rx;

static void next(struct fi_cq_data_entry *c)
{
	struct fi_cq_data_entry sent;
	while (fi_cq_read(rx.cq, c, 1) != 1)
		fi_cq_read(tx.cq, &sent, 1);
}

int main(void)
{
	open_end(&tx, 0);
	open_end(&rx, FI_BUFFERED_RECV);
	char addr[128];
	size_t len = sizeof addr;
	CK(fi_getname(&rx.ep->fid, addr, &len));
	if (fi_av_insert(tx.av, addr, 1, &tx.peer, 0, NULL) != 1)
		return 1;

	const char *notes[] = {"hello", "processed", "in place"};
	size_t bulk_len = 1 << 20;
	char *bulk = malloc(bulk_len);
	memset(bulk, 'x', bulk_len);
	for (int i = 0; i < 3; i++)
		CK(fi_send(tx.ep, notes[i], strlen(notes[i]) + 1, NULL, tx.peer, NULL));
	CK(fi_send(tx.ep, bulk, bulk_len, NULL, tx.peer, NULL));

	int bad = 0;
	for (int got = 0; got < 4; got++) {
		struct fi_cq_data_entry c;
		next(&c);
		struct fi_recv_context *rc = c.op_context;
		if (!(c.flags & FI_MORE)) {
			/* Small: use it where it is, then give the buffer back. */
			printf("message of %zu bytes, in place: \"%s\"\n", c.len, (char *)c.buf);
			struct fi_msg m = {.context = rc};
			CK(fi_recvmsg(rx.ep, &m, FI_DISCARD));
			continue;
		}
		/* Large: buf holds its start; claim all of it into our buffer. */
		char *mine = malloc(c.len);
		struct iovec iov = {mine, c.len};
		rc->context = mine; /* the claim completes with this context */
		struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .context = rc};
		CK(fi_recvmsg(rx.ep, &m, FI_CLAIM));
		do
			next(&c);
		while (!(c.flags & FI_CLAIM));
		bad |= c.op_context != mine || c.len != bulk_len || memcmp(mine, bulk, c.len);
		printf("message of %zu bytes, claimed into our buffer: %s\n", c.len, bad ? "WRONG" : "intact");
		free(mine);
	}
	free(bulk);
	struct end *ends[] = {&rx, &tx};
	for (int i = 0; i < 2; i++) {
		fi_close(&ends[i]->ep->fid);
		fi_close(&ends[i]->cq->fid);
		fi_close(&ends[i]->av->fid);
		fi_close(&ends[i]->dom->fid);
		fi_close(&ends[i]->fab->fid);
	}
	return bad;
}
