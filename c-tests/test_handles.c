/*
 * Handle validation (issue 12 finding 7): rustfab dereferences a pointer the
 * application hands it only if it is a live rustfab object of the right
 * class. Anything else -- a handle already closed, a made-up struct with the
 * right fclass, a byte copy of a real object -- is refused with -FI_EINVAL
 * and never read. Under make memcheck (valgrind) the reads themselves are
 * what fails: before the registry of live handles, a second fi_close read
 * the freed object, and a fake fid of the right class was read past its end.
 *
 * The calls on closed objects go through function pointers saved while the
 * object was alive (a second fi_close() would itself read fid->ops from the
 * freed object, in the application): what is tested is rustfab's side.
 */
#include "rdm_common.h"

struct objs {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cntr *cntr;
	struct fid_eq *eq;
	struct fid_ep *ep;
};

/* Fabric, domain, AV, CQ, counter, EQ and an endpoint (not bound, not
 * enabled) over rustfab shm. */
static int objs_open(struct objs *o)
{
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .size = 64};
	struct fi_cntr_attr na = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_eq_attr ea = {.size = 16};
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	int ret;
	memset(o, 0, sizeof(*o));
	o->info = rf_getinfo("shm", FI_EP_RDM, FI_MSG);
	if (!o->info)
		return -FI_ENODATA;
	if ((ret = fi_fabric(o->info->fabric_attr, &o->fabric, NULL)) ||
	    (ret = fi_domain(o->fabric, o->info, &o->domain, NULL)) ||
	    (ret = fi_av_open(o->domain, &aa, &o->av, NULL)) ||
	    (ret = fi_cq_open(o->domain, &ca, &o->cq, NULL)) ||
	    (ret = fi_cntr_open(o->domain, &na, &o->cntr, NULL)) ||
	    (ret = fi_eq_open(o->fabric, &ea, &o->eq, NULL)) ||
	    (ret = fi_endpoint(o->domain, o->info, &o->ep, NULL)))
		return ret;
	return 0;
}

static void objs_close(struct objs *o)
{
	if (o->ep)
		fi_close(&o->ep->fid);
	if (o->av)
		fi_close(&o->av->fid);
	if (o->cq)
		fi_close(&o->cq->fid);
	if (o->cntr)
		fi_close(&o->cntr->fid);
	if (o->domain)
		fi_close(&o->domain->fid);
	if (o->eq)
		fi_close(&o->eq->fid);
	if (o->fabric)
		fi_close(&o->fabric->fid);
	if (o->info)
		fi_freeinfo(o->info);
	memset(o, 0, sizeof(*o));
}

typedef int (*close_fn)(struct fid *);

/* Closes `f` through its own close, then again through the same function
 * pointer: the second must be -FI_EINVAL (and, under valgrind, read
 * nothing). Returns the line of a failure or 0. */
static int close_twice(struct fid *f)
{
	close_fn c = f->ops->close;
	if (c(f) != 0)
		return __LINE__;
	if (c(f) != -FI_EINVAL)
		return __LINE__;
	return 0;
}

TEST(double_close_is_einval_without_a_read)
{
	struct objs o;
	CHECK_OK(objs_open(&o));
	struct fid *order[] = {&o.ep->fid, &o.av->fid,     &o.cq->fid,    &o.cntr->fid,
			       &o.eq->fid, &o.domain->fid, &o.fabric->fid};
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		int line = close_twice(order[i]);
		if (line)
			FAIL_AT("object %zu (class %zu): failed at line %d", i, (size_t)order[i]->fclass, line);
	}
	fi_freeinfo(o.info);
}

/* Calls on closed objects through operation tables saved before the close:
 * -FI_EINVAL, nothing read. */
TEST(calls_on_closed_objects_are_einval)
{
	struct objs o;
	char buf[16];
	struct fi_cq_tagged_entry e;
	CHECK_OK(objs_open(&o));
	struct fi_ops_cq *cq_ops = o.cq->ops;
	struct fi_ops_cntr *cntr_ops = o.cntr->ops;
	struct fi_ops_msg *msg_ops = o.ep->msg;
	struct fi_ops_cm *cm_ops = o.ep->cm;
	struct fid_cq *cq = o.cq;
	struct fid_cntr *cntr = o.cntr;
	struct fid_ep *ep = o.ep;
	CHECK_OK(fi_close(&o.ep->fid));
	o.ep = NULL;
	CHECK_OK(fi_close(&o.cq->fid));
	o.cq = NULL;
	CHECK_OK(fi_close(&o.cntr->fid));
	o.cntr = NULL;
	CHECK_EQ(cq_ops->read(cq, &e, 1), -FI_EINVAL);
	CHECK_EQ(cntr_ops->add(cntr, 1), -FI_EINVAL);
	CHECK_EQ(msg_ops->send(ep, buf, sizeof(buf), NULL, 0, NULL), -FI_EINVAL);
	CHECK_EQ(msg_ops->recv(ep, buf, sizeof(buf), NULL, 0, NULL), -FI_EINVAL);
	size_t len = sizeof(buf);
	CHECK_EQ(cm_ops->getname(&ep->fid, buf, &len), -FI_EINVAL);
	objs_close(&o);
}

/* A struct the application made, with the right fclass and exactly the
 * size of the public header (another provider's object is no different to
 * rustfab): refused by every call that takes a fid, unread. */
TEST(made_up_fids_are_refused_unread)
{
	struct objs o;
	CHECK_OK(objs_open(&o));
	struct fid_cq *cq = calloc(1, sizeof(*cq));
	struct fid_cntr *cntr = calloc(1, sizeof(*cntr));
	struct fid_eq *eq = calloc(1, sizeof(*eq));
	struct fid_av *av = calloc(1, sizeof(*av));
	struct fid_wait *wait = calloc(1, sizeof(*wait));
	CHECK(cq && cntr && eq && av && wait);
	cq->fid.fclass = FI_CLASS_CQ;
	cq->fid.ops = o.cq->fid.ops; /* even rustfab's own operations */
	cq->ops = o.cq->ops;
	cntr->fid.fclass = FI_CLASS_CNTR;
	eq->fid.fclass = FI_CLASS_EQ;
	av->fid.fclass = FI_CLASS_AV;
	wait->fid.fclass = FI_CLASS_WAIT;
	CHECK_EQ(fi_ep_bind(o.ep, &cq->fid, FI_TRANSMIT | FI_RECV), -FI_EINVAL);
	CHECK_EQ(fi_ep_bind(o.ep, &cntr->fid, FI_SEND), -FI_EINVAL);
	CHECK_EQ(fi_ep_bind(o.ep, &eq->fid, 0), -FI_EINVAL);
	CHECK_EQ(fi_ep_bind(o.ep, &av->fid, 0), -FI_EINVAL);
	CHECK_EQ(fi_av_bind(o.av, &eq->fid, 0), -FI_EINVAL);
	struct fid *list[] = {&cq->fid};
	CHECK_EQ(fi_trywait(o.fabric, list, 1), -FI_EINVAL);
	struct fid *wlist[] = {&wait->fid};
	CHECK_EQ(fi_trywait(o.fabric, wlist, 1), -FI_EINVAL);
	/* The fake reached through rustfab's own operation table. */
	struct fi_cq_tagged_entry e;
	CHECK_EQ(fi_cq_read(cq, &e, 1), -FI_EINVAL);
	CHECK_EQ(fi_close(&cq->fid), -FI_EINVAL);
	/* NULL too. */
	CHECK_EQ(fi_ep_bind(o.ep, NULL, 0), -FI_EINVAL);
	/* The real ones still bind. */
	CHECK_OK(fi_ep_bind(o.ep, &o.av->fid, 0));
	CHECK_OK(fi_ep_bind(o.ep, &o.cq->fid, FI_TRANSMIT | FI_RECV));
	free(cq);
	free(cntr);
	free(eq);
	free(av);
	free(wait);
	objs_close(&o);
}

/* A byte copy of a live rustfab CQ -- its public header and what follows
 * (the check word and the pointer to its core) -- is not that CQ: before the
 * registry, the copy passed the class and magic checks and was bound. */
TEST(a_copied_object_is_not_the_object)
{
	struct objs o;
	CHECK_OK(objs_open(&o));
	/* rustfab's CQ: the fid_cq header, a check word, a flag, the core. */
	size_t n = sizeof(struct fid_cq) + 3 * sizeof(uint64_t);
	void *copy = malloc(n);
	CHECK(copy);
	memcpy(copy, o.cq, n);
	CHECK_EQ(fi_ep_bind(o.ep, (struct fid *)copy, FI_TRANSMIT | FI_RECV), -FI_EINVAL);
	struct fi_cq_tagged_entry e;
	CHECK_EQ(fi_cq_read((struct fid_cq *)copy, &e, 1), -FI_EINVAL);
	free(copy);
	CHECK_OK(fi_ep_bind(o.ep, &o.cq->fid, FI_TRANSMIT | FI_RECV));
	objs_close(&o);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(double_close_is_einval_without_a_read);
	RUN(calls_on_closed_objects_are_einval);
	RUN(made_up_fids_are_refused_unread);
	RUN(a_copied_object_is_not_the_object);
	return harness_done();
}
