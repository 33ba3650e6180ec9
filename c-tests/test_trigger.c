/* Triggered operations (fi_trigger(3), FI_TRIGGER_THRESHOLD) on the transport
 * RF_TRANSPORT names (shm, tcp, auto): a write, send or tagged send queued on
 * a counter with FI_TRIGGER does not happen (no bytes at the target, no
 * completion) before the counter reaches its threshold and happens once it
 * does, whether the counter is moved by fi_cntr_add, fi_cntr_set or by
 * completions; several thresholds issue in order; a counter already past the
 * threshold issues at once; an alias endpoint (fi_ep_alias) with FI_TRIGGER
 * in its transmit flags makes fi_write triggered (fabtests'
 * fi_rdm_rma_trigger), as its fi_send, fi_tsend, fi_read and fi_atomic; an
 * operation whose issue fails completes with an
 * error entry carrying its context; the refusals fi_trigger(3) and
 * fi_endpoint(3) name; closing a counter or an endpoint with queued
 * operations frees them (make memcheck). */
#include "rdm_common.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_trigger.h>

#define KEY 0x5151
#define R 65536
#define CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_RMA_EVENT | FI_ATOMIC | FI_TRIGGER)

struct rig {
	struct end a, b;
	unsigned char *tgt, *src;
	struct fid_mr *mr;
	struct fid_cntr *tc; /* the application's trigger counter, on a's domain */
};

static int rig_open(struct rig *r)
{
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	int ret;
	memset(r, 0, sizeof(*r));
	r->tgt = rma_region(R);
	r->src = rma_region(R);
	if (!r->tgt || !r->src)
		return -FI_ENOMEM;
	memset(r->tgt, 0xee, R);
	if ((ret = rma_pair_open(&r->a, &r->b, CAPS, 0, 1)))
		return ret;
	if ((ret = fi_mr_reg(r->b.domain, r->tgt, R, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY, 0, &r->mr, NULL)))
		return ret;
	return fi_cntr_open(r->a.domain, &ca, &r->tc, NULL);
}

static void rig_close(struct rig *r)
{
	if (r->mr)
		fi_close(&r->mr->fid);
	rma_pair_close(&r->a, &r->b);
	/* After the endpoints: a counter with queued operations closes too. */
	if (r->tc)
		fi_close(&r->tc->fid);
	munmap(r->tgt, R);
	munmap(r->src, R);
}

static void threshold(struct fi_triggered_context *t, struct fid_cntr *c, size_t th)
{
	memset(t, 0, sizeof(*t));
	t->event_type = FI_TRIGGER_THRESHOLD;
	t->trigger.threshold.cntr = c;
	t->trigger.threshold.threshold = th;
}

/* fi_writemsg with FI_TRIGGER: `len` bytes of seed `seed` from src+off to tgt+off. */
static ssize_t trig_write(struct rig *r, struct fi_triggered_context *t, size_t off, size_t len, unsigned seed)
{
	fill(r->src + off, len, seed);
	struct iovec iov = {.iov_base = r->src + off, .iov_len = len};
	struct fi_rma_iov rma = {.addr = off, .len = len, .key = KEY};
	struct fi_msg_rma m = {.msg_iov = &iov, .iov_count = 1, .addr = r->a.peer, .rma_iov = &rma,
			       .rma_iov_count = 1, .context = t};
	/* The iovec and segment are copies of the call: scribbled over after
	 * it returns, the operation must not notice. */
	ssize_t ret = fi_writemsg(r->a.ep, &m, FI_TRIGGER);
	memset(&iov, 0, sizeof(iov));
	memset(&rma, 0, sizeof(rma));
	return ret;
}

/* Progress both ends for a while: nothing completes at a, the target stays. */
static int quiet(struct rig *r, size_t off, size_t len)
{
	for (int i = 0; i < 3000; i++)
		poke(&r->a, &r->b);
	return r->a.nstash == 0 && all_bytes(r->tgt + off, len, 0xee);
}

/* One completion at a, for context `ctx`. */
static int done(struct rig *r, void *ctx)
{
	struct fi_cq_tagged_entry c;
	return rma_comp(&r->a, &r->b, &c, NULL) == 1 && c.op_context == ctx && c.flags == (FI_RMA | FI_WRITE);
}

/* Not before the threshold, at it by fi_cntr_add; the counter is one the
 * endpoint is not even bound to. */
TEST(write_waits_for_threshold)
{
	struct rig r;
	struct fi_triggered_context t;
	CHECK_OK(rig_open(&r));
	threshold(&t, r.tc, 3);
	CHECK_EQ(trig_write(&r, &t, 0, 4096, 1), 0);
	CHECK(quiet(&r, 0, 4096));
	CHECK_OK(fi_cntr_add(r.tc, 2));
	CHECK(quiet(&r, 0, 4096));
	CHECK_EQ(fi_cntr_read(c_write), 0);
	CHECK_OK(fi_cntr_add(r.tc, 1));
	CHECK(done(&r, &t));
	CHECK(check_fill(r.tgt, 4096, 1));
	CHECK_EQ(fi_cntr_read(c_write), 1);
	CHECK_EQ(fi_cntr_read(r.tc), 3);
	rig_close(&r);
}

/* Thresholds 5, 2, 5 submitted in that order: at 2 only the second one
 * lands; fi_cntr_set past 5 issues the other two (in submission order: the
 * completions, delivery complete, say so). */
TEST(several_thresholds_in_order)
{
	struct rig r;
	struct fi_triggered_context t[3];
	CHECK_OK(rig_open(&r));
	threshold(&t[0], r.tc, 5);
	threshold(&t[1], r.tc, 2);
	threshold(&t[2], r.tc, 5);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(trig_write(&r, &t[i], 1000 * (size_t)i, 512, 10 + (unsigned)i), 0);
	CHECK(quiet(&r, 0, 3000));
	CHECK_OK(fi_cntr_set(r.tc, 2));
	CHECK(done(&r, &t[1]));
	CHECK(check_fill(r.tgt + 1000, 512, 11));
	CHECK(quiet(&r, 0, 512));
	CHECK(quiet(&r, 2000, 512));
	CHECK_OK(fi_cntr_set(r.tc, 9));
	CHECK(done(&r, &t[0]));
	CHECK(done(&r, &t[2]));
	CHECK(check_fill(r.tgt, 512, 10));
	CHECK(check_fill(r.tgt + 2000, 512, 12));
	CHECK_EQ(fi_cntr_read(c_write), 3);
	rig_close(&r);
}

/* A counter already at or past the threshold: issued in the call. */
TEST(already_past_issues_at_once)
{
	struct rig r;
	struct fi_triggered_context t, t0;
	CHECK_OK(rig_open(&r));
	CHECK_OK(fi_cntr_set(r.tc, 10));
	threshold(&t, r.tc, 4);
	CHECK_EQ(trig_write(&r, &t, 0, 100, 3), 0);
	CHECK(done(&r, &t));
	CHECK(check_fill(r.tgt, 100, 3));
	threshold(&t0, r.tc, 0);
	CHECK_EQ(trig_write(&r, &t0, 200, 100, 4), 0);
	CHECK(done(&r, &t0));
	CHECK(check_fill(r.tgt + 200, 100, 4));
	rig_close(&r);
}

/* fabtests' fi_rdm_rma_trigger: an alias with FI_TRIGGER in its transmit
 * flags; its fi_write waits for the write counter to count the plain write
 * that follows it, then overwrites what that one wrote. Completions move the
 * counter; the target's FI_REMOTE_WRITE counter sees both. */
TEST(alias_write_triggered_by_completion)
{
	struct rig r;
	struct fi_triggered_context t;
	struct fid_ep *alias;
	CHECK_OK(rig_open(&r));
	CHECK_OK(fi_ep_alias(r.a.ep, &alias, FI_TRANSMIT | FI_TRIGGER));
	uint64_t flags = FI_TRANSMIT;
	CHECK_OK(fi_control(&alias->fid, FI_GETOPSFLAG, &flags));
	CHECK_EQ(flags, FI_TRIGGER);
	uint64_t base = fi_cntr_read(c_write);
	threshold(&t, c_write, base + 1);
	fill(r.src, 64, 21);
	fill(r.src + 64, 64, 22);
	CHECK_EQ(fi_write(alias, r.src + 64, 64, NULL, r.a.peer, 0, KEY, &t), 0);
	CHECK(quiet(&r, 0, 64));
	CHECK_EQ(fi_write(r.a.ep, r.src, 64, NULL, r.a.peer, 0, KEY, &r), 0);
	CHECK(done(&r, &r));
	CHECK(done(&r, &t));
	CHECK_OK(fi_cntr_wait(c_write, base + 2, 5000));
	CHECK(check_fill(r.tgt, 64, 22));
	double deadline = now_sec() + 10 * rf_time_scale();
	while (fi_cntr_read(c_rwrite) < 2 && now_sec() < deadline)
		poke(&r.a, &r.b);
	CHECK_EQ(fi_cntr_read(c_rwrite), 2);
	/* The parent cannot close while the alias lives. */
	CHECK_EQ(fi_close(&r.a.ep->fid), -FI_EBUSY);
	CHECK_OK(fi_close(&alias->fid));
	/* Flags naming both directions or neither. */
	CHECK_EQ(fi_ep_alias(r.a.ep, &alias, FI_TRANSMIT | FI_RECV), -FI_EINVAL);
	CHECK_EQ(fi_ep_alias(r.a.ep, &alias, FI_TRIGGER), -FI_EINVAL);
	rig_close(&r);
}

/* The calls without flags through an alias with FI_TRIGGER in its transmit
 * flags are triggered, each family turned into its msg call: fi_send,
 * fi_tsend, fi_read, fi_atomic, issued one by one as the counter moves; a
 * receive through an FI_RECV alias of the target. */
TEST(alias_calls_are_triggered)
{
	struct rig r;
	struct fi_triggered_context t[4];
	struct fid_ep *tx, *rx;
	struct fi_cq_tagged_entry c;
	unsigned char out[2][100], in[2][100];
	uint64_t operand = 5, *word;
	CHECK_OK(rig_open(&r));
	CHECK_OK(fi_ep_alias(r.a.ep, &tx, FI_TRANSMIT | FI_TRIGGER));
	CHECK_OK(fi_ep_alias(r.b.ep, &rx, FI_RECV | FI_COMPLETION));
	uint64_t flags = FI_RECV;
	CHECK_OK(fi_control(&rx->fid, FI_GETOPSFLAG, &flags));
	CHECK_EQ(flags, FI_COMPLETION);
	fill(out[0], 100, 41);
	fill(out[1], 100, 42);
	memset(in, 0, sizeof(in));
	fill(r.tgt + 4096, 64, 43);
	word = (uint64_t *)(r.tgt + 8192);
	*word = 10;
	CHECK_EQ(fi_recv(rx, in[0], 100, NULL, FI_ADDR_UNSPEC, &in[0]), 0);
	CHECK_EQ(fi_trecv(rx, in[1], 100, NULL, FI_ADDR_UNSPEC, 5, 0, &in[1]), 0);
	for (int i = 0; i < 4; i++)
		threshold(&t[i], r.tc, (size_t)i + 1);
	CHECK_EQ(fi_send(tx, out[0], 100, NULL, r.a.peer, &t[0]), 0);
	CHECK_EQ(fi_tsend(tx, out[1], 100, NULL, r.a.peer, 5, &t[1]), 0);
	CHECK_EQ(fi_read(tx, r.src, 64, NULL, r.a.peer, 4096, KEY, &t[2]), 0);
	CHECK_EQ(fi_atomic(tx, &operand, 1, NULL, r.a.peer, 8192, KEY, FI_UINT64, FI_SUM, &t[3]), 0);
	for (int i = 0; i < 3000; i++)
		poke(&r.a, &r.b);
	CHECK_EQ(r.a.nstash, 0);
	CHECK_EQ(r.b.nstash, 0);
	CHECK(*word == 10);
	/* One by one. */
	CHECK_OK(fi_cntr_add(r.tc, 1));
	CHECK_EQ(wait_comp(&r.b, &r.a, &c, NULL, NULL, 20), 1);
	CHECK(c.op_context == &in[0] && check_fill(in[0], 100, 41));
	CHECK_EQ(wait_comp(&r.a, &r.b, &c, NULL, NULL, 20), 1);
	CHECK(c.op_context == &t[0] && c.flags == (FI_SEND | FI_MSG));
	CHECK_OK(fi_cntr_add(r.tc, 1));
	CHECK_EQ(wait_comp(&r.b, &r.a, &c, NULL, NULL, 20), 1);
	CHECK(c.op_context == &in[1] && c.tag == 5 && check_fill(in[1], 100, 42));
	CHECK_EQ(wait_comp(&r.a, &r.b, &c, NULL, NULL, 20), 1);
	CHECK(c.op_context == &t[1] && c.flags == (FI_SEND | FI_TAGGED));
	CHECK(all_bytes(r.src, 64, 0));
	CHECK_OK(fi_cntr_add(r.tc, 1));
	CHECK_EQ(rma_comp(&r.a, &r.b, &c, NULL), 1);
	CHECK(c.op_context == &t[2] && c.flags == (FI_RMA | FI_READ));
	CHECK(check_fill(r.src, 64, 43));
	CHECK(*word == 10);
	CHECK_OK(fi_cntr_add(r.tc, 1));
	CHECK_EQ(rma_comp(&r.a, &r.b, &c, NULL), 1);
	CHECK(c.op_context == &t[3] && c.flags == (FI_ATOMIC | FI_WRITE));
	CHECK(*word == 15);
	CHECK_EQ(fi_cntr_read(c_read), 1);
	CHECK_OK(fi_close(&tx->fid));
	CHECK_OK(fi_close(&rx->fid));
	rig_close(&r);
}

/* Triggered fi_sendmsg and fi_tsendmsg: the receive waits for the counter. */
TEST(triggered_send_and_tsend)
{
	struct rig r;
	struct fi_triggered_context t1, t2;
	unsigned char out[2][300], in[2][300];
	struct fi_cq_tagged_entry c;
	CHECK_OK(rig_open(&r));
	fill(out[0], 300, 31);
	fill(out[1], 300, 32);
	memset(in, 0, sizeof(in));
	CHECK_EQ(fi_recv(r.b.ep, in[0], 300, NULL, FI_ADDR_UNSPEC, &in[0]), 0);
	CHECK_EQ(fi_trecv(r.b.ep, in[1], 300, NULL, FI_ADDR_UNSPEC, 77, 0, &in[1]), 0);
	threshold(&t1, r.tc, 1);
	threshold(&t2, r.tc, 2);
	struct iovec v1 = {.iov_base = out[0], .iov_len = 300}, v2 = {.iov_base = out[1], .iov_len = 300};
	struct fi_msg m = {.msg_iov = &v1, .iov_count = 1, .addr = r.a.peer, .context = &t1};
	struct fi_msg_tagged tm = {.msg_iov = &v2, .iov_count = 1, .addr = r.a.peer, .tag = 77, .context = &t2};
	CHECK_EQ(fi_sendmsg(r.a.ep, &m, FI_TRIGGER), 0);
	CHECK_EQ(fi_tsendmsg(r.a.ep, &tm, FI_TRIGGER), 0);
	for (int i = 0; i < 3000; i++)
		poke(&r.a, &r.b);
	CHECK_EQ(r.b.nstash, 0);
	CHECK_OK(fi_cntr_add(r.tc, 1));
	CHECK_EQ(wait_comp(&r.b, &r.a, &c, NULL, NULL, 20), 1);
	CHECK(c.op_context == &in[0]);
	CHECK(check_fill(in[0], 300, 31));
	for (int i = 0; i < 2000; i++)
		poke(&r.a, &r.b);
	CHECK_EQ(r.b.nstash, 0);
	CHECK_OK(fi_cntr_add(r.tc, 1));
	CHECK_EQ(wait_comp(&r.b, &r.a, &c, NULL, NULL, 20), 1);
	CHECK(c.op_context == &in[1]);
	CHECK_EQ(c.tag, 77);
	CHECK(check_fill(in[1], 300, 32));
	/* The sender's two completions, with the triggered contexts. */
	CHECK_EQ(wait_comp(&r.a, &r.b, &c, NULL, NULL, 20), 1);
	CHECK(c.op_context == &t1);
	CHECK_EQ(wait_comp(&r.a, &r.b, &c, NULL, NULL, 20), 1);
	CHECK(c.op_context == &t2);
	rig_close(&r);
}

/* What fi_trigger(3) refuses, and an issue that fails. */
TEST(errors)
{
	struct rig r;
	struct fi_triggered_context t;
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	CHECK_OK(rig_open(&r));
	threshold(&t, r.tc, 1);
	t.event_type = FI_TRIGGER_XPU;
	CHECK_EQ(trig_write(&r, &t, 0, 8, 1), -FI_ENOSYS);
	t.event_type = 99;
	CHECK_EQ(trig_write(&r, &t, 0, 8, 1), -FI_EINVAL);
	threshold(&t, NULL, 1);
	CHECK_EQ(trig_write(&r, &t, 0, 8, 1), -FI_EINVAL);
	threshold(&t, (struct fid_cntr *)r.b.cq, 1); /* not a counter */
	CHECK_EQ(trig_write(&r, &t, 0, 8, 1), -FI_EINVAL);
	struct iovec iov = {.iov_base = r.src, .iov_len = 8};
	struct fi_rma_iov rma = {.addr = 0, .len = 8, .key = KEY};
	struct fi_msg_rma m = {.msg_iov = &iov, .iov_count = 1, .addr = r.a.peer, .rma_iov = &rma,
			       .rma_iov_count = 1, .context = NULL};
	CHECK_EQ(fi_writemsg(r.a.ep, &m, FI_TRIGGER), -FI_EINVAL);
	/* Accepted, then refused when issued (no target segment): an error
	 * completion with the operation's context, an error on the counter. */
	threshold(&t, r.tc, 1);
	m.context = &t;
	m.rma_iov_count = 0;
	CHECK_EQ(fi_writemsg(r.a.ep, &m, FI_TRIGGER), 0);
	CHECK(quiet(&r, 0, 8));
	CHECK_OK(fi_cntr_add(r.tc, 1));
	memset(&err, 0, sizeof(err));
	CHECK_EQ(rma_comp(&r.a, &r.b, &c, &err), -FI_EAVAIL);
	CHECK(err.op_context == &t);
	CHECK_EQ(err.err, FI_EINVAL);
	CHECK_EQ(fi_cntr_readerr(c_write), 1);
	CHECK(all_bytes(r.tgt, 8, 0xee));
	/* Queued and never issued: freed with the counter (closed first) and
	 * with the endpoint (rig_close). */
	struct fid_cntr *tc2;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_triggered_context t2, t3;
	CHECK_OK(fi_cntr_open(r.a.domain, &ca, &tc2, NULL));
	threshold(&t2, tc2, 100);
	CHECK_EQ(trig_write(&r, &t2, 0, 8, 1), 0);
	CHECK_OK(fi_close(&tc2->fid));
	threshold(&t3, r.tc, 1000);
	CHECK_EQ(trig_write(&r, &t3, 0, 8, 1), 0);
	CHECK(quiet(&r, 0, 8));
	rig_close(&r);
	/* An endpoint without FI_TRIGGER: the flag is unknown there. */
	struct end a, b;
	CHECK_OK(rma_pair_open(&a, &b, FI_MSG | FI_RMA, 0, 0));
	struct fid_cntr *tc3;
	CHECK_OK(fi_cntr_open(a.domain, &ca, &tc3, NULL));
	threshold(&t, tc3, 0);
	m.rma_iov_count = 1;
	CHECK_EQ(fi_writemsg(a.ep, &m, FI_TRIGGER), -FI_EBADFLAGS);
	fi_close(&tc3->fid);
	rma_pair_close(&a, &b);
}

/* Closing an endpoint frees the operations it queued: the counter reaching
 * their threshold afterwards issues nothing, not even on a new endpoint
 * that takes the closed one's place (rustfab reuses the object's memory). */
TEST(closed_endpoint_forgets_its_operations)
{
	struct rig r;
	struct fi_triggered_context t;
	struct fid_ep *old, *ep2;
	CHECK_OK(rig_open(&r));
	threshold(&t, r.tc, 2);
	CHECK_EQ(trig_write(&r, &t, 0, 64, 5), 0);
	old = r.a.ep;
	CHECK_OK(fi_close(&r.a.ep->fid));
	r.a.ep = NULL;
	CHECK_OK(fi_endpoint(r.a.domain, r.a.info, &ep2, NULL));
	CHECK_OK(fi_ep_bind(ep2, &r.a.av->fid, 0));
	CHECK_OK(fi_ep_bind(ep2, &r.a.cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK_OK(fi_enable(ep2));
	r.a.ep = ep2;
	if (ep2 != old)
		printf("note: the new endpoint is not at the closed one's address\n");
	CHECK_OK(fi_cntr_add(r.tc, 5));
	CHECK(quiet(&r, 0, 64));
	rig_close(&r);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	/* First: no closed endpoint's memory is waiting for reuse but its own. */
	RUN(closed_endpoint_forgets_its_operations);
	RUN(write_waits_for_threshold);
	RUN(several_thresholds_in_order);
	RUN(already_past_issues_at_once);
	RUN(alias_write_triggered_by_completion);
	RUN(triggered_send_and_tsend);
	RUN(alias_calls_are_triggered);
	RUN(errors);
	return harness_done();
}
