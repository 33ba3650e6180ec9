/* RMA through the public API (fi_rma(3)) on the transport RF_TRANSPORT names
 * (shm, tcp, auto): fi_write/writev/writemsg, fi_read/readv/readmsg,
 * fi_inject_write, fi_writedata, fi_inject_writedata with the bytes checked
 * at both ends, sizes from 1 byte to past the rendezvous limits, remote CQ
 * data, initiator, target and region (fi_mr_bind) counters, both addressing modes (0-based
 * offsets; FI_MR_VIRT_ADDR with provider keys), and the target's checks: a
 * bad key, a range outside the region or an access the region does not
 * grant is an error completion at the initiator and changes no memory at
 * either end. A last test runs the target in another process (shm: the
 * process_vm_* path between kernel-verified peers). */
#include "rdm_common.h"

#include <rdma/fi_rma.h>

#define TO 20 /* seconds to wait for bytes */
#define KEY_RW 0x1234
#define KEY_RO 0x2345
#define KEY_WO 0x3456
#define BIG ((1u << 20) + 77)

#define PAIR_CAPS (FI_MSG | FI_RMA | FI_RMA_EVENT)

/* No completion shows up at `e` while both ends progress for a while. */
static int no_comp(struct end *e, struct end *other)
{
	for (int i = 0; i < 2000; i++)
		poke(e, other);
	return e->nstash == 0;
}

/* Drives both ends until `len` bytes at `p` hold the fill of `seed`. */
static int wait_bytes(struct end *a, struct end *b, const void *p, size_t len, unsigned seed)
{
	double deadline = now_sec() + TO * rf_time_scale();
	while (now_sec() < deadline) {
		if (check_fill(p, len, seed))
			return 1;
		poke(a, b);
	}
	return 0;
}

/* Every size through write then read, 0-based offsets, with guards. */
TEST(write_read_sizes)
{
	struct end a, b;
	size_t sizes[] = {1, 7, 64, 4096, 65536 + 13, 300000, BIG};
	size_t cap = BIG + 8192;
	unsigned char *tgt = rma_region(cap), *loc = rma_region(cap);
	struct fid_mr *mr;
	CHECK(tgt && loc);
	CHECK_OK(rma_pair_open(&a, &b, PAIR_CAPS, 0, 1));
	CHECK_OK(fi_mr_reg(b.domain, tgt, cap, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mr, NULL));
	/* The region's own counters (fi_mr_bind): writes, reads. */
	struct fid_cntr *mw, *mrd;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	CHECK_OK(fi_cntr_open(b.domain, &ca, &mw, NULL));
	CHECK_OK(fi_cntr_open(b.domain, &ca, &mrd, NULL));
	CHECK_OK(fi_mr_bind(mr, &mw->fid, FI_REMOTE_WRITE));
	CHECK_OK(fi_mr_bind(mr, &mrd->fid, FI_REMOTE_READ));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i], off = 100 + i;
		struct fi_cq_tagged_entry c;
		memset(tgt, 0xee, cap);
		fill(loc, n, (unsigned)i);
		CHECK_EQ(POST(fi_write(a.ep, loc, n, NULL, a.peer, off, KEY_RW, &sizes[i]), &a, &b), 0);
		CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
		CHECK(c.op_context == &sizes[i]);
		CHECK_EQ(c.flags, FI_RMA | FI_WRITE);
		/* Delivery complete: the bytes are at the target now. */
		CHECK(check_fill(tgt + off, n, (unsigned)i));
		CHECK(all_bytes(tgt, off, 0xee));
		CHECK(all_bytes(tgt + off + n, cap - off - n, 0xee));
		/* Read them back into a cleared buffer. */
		memset(loc, 0, cap);
		CHECK_EQ(POST(fi_read(a.ep, loc + 3, n, NULL, a.peer, off, KEY_RW, &sizes[i]), &a, &b), 0);
		CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
		CHECK(c.op_context == &sizes[i]);
		CHECK_EQ(c.flags, FI_RMA | FI_READ);
		CHECK(check_fill(loc + 3, n, (unsigned)i));
		CHECK(all_bytes(loc, 3, 0));
		CHECK(all_bytes(loc + 3 + n, cap - 3 - n, 0));
	}
	size_t ops = sizeof(sizes) / sizeof(sizes[0]);
	CHECK_EQ(fi_cntr_read(c_write), ops);
	CHECK_EQ(fi_cntr_read(c_read), ops);
	CHECK_EQ(fi_cntr_read(c_rwrite), ops);
	CHECK_EQ(fi_cntr_read(c_rread), ops);
	CHECK_EQ(fi_cntr_read(mw), ops);
	CHECK_EQ(fi_cntr_read(mrd), ops);
	CHECK(no_comp(&b, &a)); /* no remote CQ data asked: no target entry */
	CHECK_EQ(fi_close(&mw->fid), -FI_EBUSY); /* bound to the MR */
	fi_close(&mr->fid);
	CHECK_OK(fi_close(&mw->fid));
	CHECK_OK(fi_close(&mrd->fid));
	rma_pair_close(&a, &b);
	munmap(tgt, cap);
	munmap(loc, cap);
}

/* writev/readv and writemsg/readmsg with several local iovecs and several
 * target segments, in two regions (regv: 0-based offsets run across the
 * registered iovecs in order). */
TEST(vectors_and_segments)
{
	struct end a, b;
	enum { R = 256 * 1024 };
	unsigned char *t1 = rma_region(R), *t2 = rma_region(2 * R), *src = rma_region(2 * R), *dst = rma_region(2 * R);
	struct fid_mr *m1, *m2;
	struct fi_cq_tagged_entry c;
	CHECK(t1 && t2 && src && dst);
	CHECK_OK(rma_pair_open(&a, &b, PAIR_CAPS, 0, 0));
	CHECK_OK(fi_mr_reg(b.domain, t1, R, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &m1, NULL));
	/* t2 registered as two iovecs: its second half first. */
	struct iovec riov[2] = {{t2 + R, R}, {t2, R}};
	CHECK_OK(fi_mr_regv(b.domain, riov, 2, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW + 1, 0, &m2, NULL));
	memset(t1, 0, R);
	memset(t2, 0, 2 * R);

	/* writev: three local pieces to one target range. */
	fill(src, 150000, 5);
	struct iovec v[3] = {{src, 10}, {src + 10, 70000}, {src + 70010, 79990}};
	CHECK_EQ(POST(fi_writev(a.ep, v, NULL, 3, a.peer, 1000, KEY_RW, &v), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK(c.op_context == &v);
	CHECK(check_fill(t1 + 1000, 150000, 5));
	/* readv back in three other pieces. */
	memset(dst, 0, 2 * R);
	struct iovec rv[3] = {{dst, 99999}, {dst + 99999, 1}, {dst + 100000, 50000}};
	CHECK_EQ(POST(fi_readv(a.ep, rv, NULL, 3, a.peer, 1000, KEY_RW, &rv), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK_EQ(c.flags, FI_RMA | FI_READ);
	CHECK(check_fill(dst, 150000, 5));

	/* writemsg: two local pieces, three segments in two regions; the
	 * second region's offset R - 100 crosses from its first registered
	 * iovec (t2 + R ..) into its second (t2 ..). */
	fill(src, 3000 + 200 + 100000, 9);
	struct iovec mv[2] = {{src, 1234}, {src + 1234, 3000 + 200 + 100000 - 1234}};
	struct fi_rma_iov seg[3] = {
		{.addr = 10, .len = 3000, .key = KEY_RW},
		{.addr = R - 100, .len = 200, .key = KEY_RW + 1},
		{.addr = 50000, .len = 100000, .key = KEY_RW},
	};
	struct fi_msg_rma msg = {0};
	msg.msg_iov = mv;
	msg.iov_count = 2;
	msg.addr = a.peer;
	msg.rma_iov = seg;
	msg.rma_iov_count = 3;
	msg.context = &msg;
	memset(t1, 0, R);
	CHECK_EQ(POST(fi_writemsg(a.ep, &msg, FI_COMPLETION), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK(c.op_context == &msg);
	CHECK_EQ(c.flags, FI_RMA | FI_WRITE);
	CHECK(check_fill(t1 + 10, 3000, 9));
	/* The 200 bytes: 100 at the end of t2's second half, 100 at t2. */
	unsigned char want[200];
	fill(want, 3000 + 200, 9);
	{
		unsigned char all[3200];
		fill(all, 3200, 9);
		memcpy(want, all + 3000, 200);
	}
	CHECK(memcmp(t2 + 2 * R - 100, want, 100) == 0);
	CHECK(memcmp(t2, want + 100, 100) == 0);
	CHECK(all_bytes(t2 + 100, R - 100, 0));
	{
		unsigned char *all = malloc(103200);
		CHECK(all);
		fill(all, 103200, 9);
		CHECK(memcmp(t1 + 50000, all + 3200, 100000) == 0);
		free(all);
	}
	/* readmsg of the same three segments into one buffer. */
	memset(dst, 0, 2 * R);
	struct iovec one = {dst, 103200};
	msg.msg_iov = &one;
	msg.iov_count = 1;
	CHECK_EQ(POST(fi_readmsg(a.ep, &msg, FI_COMPLETION), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK_EQ(c.flags, FI_RMA | FI_READ);
	CHECK(check_fill(dst, 103200, 9));
	/* FI_FENCE: the fenced write starts only after the one before it
	 * completed (the call says -FI_EAGAIN until then), so when it has
	 * been accepted the first one's completion is already there. */
	fill(src, 200000, 12);
	CHECK_EQ(POST(fi_write(a.ep, src, 200000, NULL, a.peer, 0, KEY_RW, src), &a, &b), 0);
	struct iovec fv = {src + 100, 10};
	struct fi_rma_iov fseg = {.addr = 5, .len = 10, .key = KEY_RW + 1};
	struct fi_msg_rma fm = {.msg_iov = &fv, .iov_count = 1, .addr = a.peer, .rma_iov = &fseg,
				.rma_iov_count = 1, .context = &fm};
	CHECK_EQ(POST(fi_writemsg(a.ep, &fm, FI_COMPLETION | FI_FENCE), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK(c.op_context == src);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK(c.op_context == &fm);
	CHECK(check_fill(t1, 200000, 12));
	CHECK(memcmp(t2 + R + 5, src + 100, 10) == 0);
	/* Lengths that do not add up, or no segment: -FI_EINVAL at post. */
	seg[2].len = 99999;
	CHECK_EQ(fi_readmsg(a.ep, &msg, FI_COMPLETION), -FI_EINVAL);
	msg.rma_iov_count = 0;
	CHECK_EQ(fi_readmsg(a.ep, &msg, FI_COMPLETION), -FI_EINVAL);
	fi_close(&m1->fid);
	fi_close(&m2->fid);
	rma_pair_close(&a, &b);
	munmap(t1, R);
	munmap(t2, 2 * R);
	munmap(src, 2 * R);
	munmap(dst, 2 * R);
}

/* fi_inject_write (no completion, buffer reusable at once), fi_writedata
 * and fi_inject_writedata (remote CQ data at the target's receive CQ). */
TEST(inject_and_remote_data)
{
	struct end a, b;
	enum { R = 65536 };
	unsigned char *t = rma_region(R), buf[64];
	struct fid_mr *mr;
	struct fi_cq_tagged_entry c;
	CHECK(t);
	CHECK_OK(rma_pair_open(&a, &b, PAIR_CAPS, 0, 1));
	CHECK_OK(fi_mr_reg(b.domain, t, R, FI_REMOTE_WRITE, 0, KEY_WO, 0, &mr, NULL));
	memset(t, 0, R);
	fill(buf, sizeof(buf), 21);
	CHECK_EQ(POST(fi_inject_write(a.ep, buf, sizeof(buf), a.peer, 64, KEY_WO), &a, &b), 0);
	memset(buf, 0, sizeof(buf)); /* ours again */
	CHECK(wait_bytes(&a, &b, t + 64, sizeof(buf), 21));
	CHECK(no_comp(&a, &b));
	CHECK(no_comp(&b, &a));
	/* Injecting more than inject_size: -FI_EMSGSIZE. */
	CHECK_EQ(fi_inject_write(a.ep, t, a.info->tx_attr->inject_size + 1, a.peer, 0, KEY_WO), -FI_EMSGSIZE);

	/* writedata: the initiator's completion, and the target's entry. */
	fill(buf, sizeof(buf), 22);
	CHECK_EQ(POST(fi_writedata(a.ep, buf, 40, NULL, 0xfeedbeef, a.peer, 1000, KEY_WO, buf), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK(c.op_context == buf);
	CHECK_EQ(c.flags, FI_RMA | FI_WRITE);
	CHECK_EQ(rma_comp(&b, &a, &c, NULL), 1);
	CHECK_EQ(c.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	CHECK_EQ(c.data, 0xfeedbeef);
	CHECK(check_fill(t + 1000, 40, 22));

	/* inject_writedata: the target's entry only. */
	fill(buf, sizeof(buf), 23);
	CHECK_EQ(POST(fi_inject_writedata(a.ep, buf, 33, 0x77, a.peer, 2000, KEY_WO), &a, &b), 0);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(rma_comp(&b, &a, &c, NULL), 1);
	CHECK_EQ(c.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	CHECK_EQ(c.data, 0x77);
	CHECK(check_fill(t + 2000, 33, 23));
	CHECK(no_comp(&a, &b));

	/* writemsg with FI_REMOTE_CQ_DATA and a large payload. */
	unsigned char *big = malloc(50000);
	CHECK(big);
	fill(big, 50000, 24);
	struct iovec iov = {big, 50000};
	struct fi_rma_iov seg = {.addr = 5000, .len = 50000, .key = KEY_WO};
	struct fi_msg_rma msg = {.msg_iov = &iov, .iov_count = 1, .addr = a.peer, .rma_iov = &seg,
				 .rma_iov_count = 1, .context = big, .data = 0xabc};
	CHECK_EQ(POST(fi_writemsg(a.ep, &msg, FI_COMPLETION | FI_REMOTE_CQ_DATA), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK(c.op_context == big);
	CHECK_EQ(rma_comp(&b, &a, &c, NULL), 1);
	CHECK_EQ(c.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	CHECK_EQ(c.data, 0xabc);
	CHECK(check_fill(t + 5000, 50000, 24));
	free(big);
	/* Counters: every write counted at both ends (injects too). */
	CHECK_EQ(fi_cntr_read(c_write), 4);
	CHECK_EQ(fi_cntr_read(c_rwrite), 4);
	fi_close(&mr->fid);
	rma_pair_close(&a, &b);
	munmap(t, R);
}

/* One refused operation: error completion `want` at the initiator, with
 * its context and flags; neither buffer changed. */
static void refused(struct end *a, struct end *b, int is_read, size_t len, uint64_t addr, uint64_t key, int want,
		    unsigned char *tgt, size_t tlen, unsigned char *loc)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	memset(tgt, 0x5a, tlen);
	memset(loc, 0xa5, len);
	ssize_t r = is_read ? POST(fi_read(a->ep, loc, len, NULL, a->peer, addr, key, loc), a, b)
			    : POST(fi_write(a->ep, loc, len, NULL, a->peer, addr, key, loc), a, b);
	CHECK_EQ(r, 0);
	CHECK_EQ(rma_comp(a, b, &c, &err), -FI_EAVAIL);
	CHECK_EQ(err.err, want);
	CHECK(err.op_context == loc);
	CHECK_EQ(err.flags, FI_RMA | (is_read ? FI_READ : FI_WRITE));
	CHECK(all_bytes(tgt, tlen, 0x5a));
	CHECK(all_bytes(loc, len, 0xa5));
}

#define REFUSED(...)                           \
	do {                                   \
		refused(__VA_ARGS__);          \
		if (h_cur_failed)              \
			FAIL_AT("refused(%s)", #__VA_ARGS__); \
	} while (0)

/* The target checks key, range and access right before any access. */
TEST(access_violations)
{
	struct end a, b;
	enum { R = 8192 };
	unsigned char *rw = rma_region(R), *ro = rma_region(R), *wo = rma_region(R), *loc = rma_region(BIG);
	struct fid_mr *mrw, *mro, *mwo;
	CHECK(rw && ro && wo && loc);
	CHECK_OK(rma_pair_open(&a, &b, PAIR_CAPS, 0, 1));
	CHECK_OK(fi_mr_reg(b.domain, rw, R, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mrw, NULL));
	CHECK_OK(fi_mr_reg(b.domain, ro, R, FI_REMOTE_READ, 0, KEY_RO, 0, &mro, NULL));
	CHECK_OK(fi_mr_reg(b.domain, wo, R, FI_REMOTE_WRITE, 0, KEY_WO, 0, &mwo, NULL));
	struct fid_cntr *rc;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	CHECK_OK(fi_cntr_open(b.domain, &ca, &rc, NULL));
	CHECK_OK(fi_mr_bind(mrw, &rc->fid, FI_REMOTE_WRITE | FI_REMOTE_READ));
	/* Unknown key: -FI_EINVAL (small and large: the CMA path on shm). */
	REFUSED(&a, &b, 0, 100, 0, 0x9999, FI_EINVAL, rw, R, loc);
	REFUSED(&a, &b, 1, 100, 0, 0x9999, FI_EINVAL, rw, R, loc);
	REFUSED(&a, &b, 0, BIG, 0, 0x9999, FI_EINVAL, rw, R, loc);
	REFUSED(&a, &b, 1, BIG, 0, 0x9999, FI_EINVAL, rw, R, loc);
	/* Out of the region: past its end, straddling it, huge offsets. */
	REFUSED(&a, &b, 0, 100, R - 50, KEY_RW, FI_EACCES, rw, R, loc);
	REFUSED(&a, &b, 1, 100, R - 50, KEY_RW, FI_EACCES, rw, R, loc);
	REFUSED(&a, &b, 0, 1, R, KEY_RW, FI_EACCES, rw, R, loc);
	REFUSED(&a, &b, 0, 16, UINT64_MAX - 8, KEY_RW, FI_EACCES, rw, R, loc);
	REFUSED(&a, &b, 0, BIG, 0, KEY_RW, FI_EACCES, rw, R, loc);
	REFUSED(&a, &b, 1, BIG, 0, KEY_RW, FI_EACCES, rw, R, loc);
	/* Access not granted: writing a read-only region, reading a
	 * write-only one. */
	REFUSED(&a, &b, 0, 100, 0, KEY_RO, FI_EACCES, ro, R, loc);
	REFUSED(&a, &b, 0, R, 0, KEY_RO, FI_EACCES, ro, R, loc);
	REFUSED(&a, &b, 1, 100, 0, KEY_WO, FI_EACCES, wo, R, loc);
	REFUSED(&a, &b, 1, R, 0, KEY_WO, FI_EACCES, wo, R, loc);
	/* A closed region is gone: its key is unknown. */
	CHECK_OK(fi_close(&mro->fid));
	REFUSED(&a, &b, 1, 100, 0, KEY_RO, FI_EINVAL, ro, R, loc);
	/* Errors count at the initiator's counters, not as successes; none at
	 * the target; the peer still works. */
	CHECK_EQ(fi_cntr_read(c_write) + fi_cntr_read(c_read), 0);
	CHECK_EQ(fi_cntr_readerr(c_write), 8);
	CHECK_EQ(fi_cntr_readerr(c_read), 7);
	CHECK_EQ(fi_cntr_read(c_rwrite) + fi_cntr_read(c_rread), 0);
	struct fi_cq_tagged_entry c;
	fill(loc, 500, 3);
	CHECK_EQ(POST(fi_write(a.ep, loc, 500, NULL, a.peer, 7, KEY_RW, NULL), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK(check_fill(rw + 7, 500, 3));
	CHECK(no_comp(&b, &a));
	CHECK_EQ(fi_cntr_read(rc), 1); /* the refused ones did not count */
	fi_close(&mrw->fid);
	fi_close(&rc->fid);
	fi_close(&mwo->fid);
	rma_pair_close(&a, &b);
	munmap(rw, R);
	munmap(ro, R);
	munmap(wo, R);
	munmap(loc, BIG);
}

/* FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | FI_MR_LOCAL, as
 * fabtests ask: the key is the provider's, target addresses are virtual,
 * local descriptors are passed. */
TEST(virt_addr_prov_key)
{
	struct end a, b;
	enum { R = 300000 };
	unsigned char *t = rma_region(R), *l = rma_region(R);
	struct fid_mr *mt, *ml;
	struct fi_cq_tagged_entry c;
	CHECK(t && l);
	CHECK_OK(rma_pair_open(&a, &b, PAIR_CAPS, FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | FI_MR_LOCAL, 0));
	CHECK_OK(fi_mr_reg(b.domain, t, R, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mt, NULL));
	CHECK_OK(fi_mr_reg(a.domain, l, R, FI_READ | FI_WRITE, 0, 0, 0, &ml, NULL));
	uint64_t key = fi_mr_key(mt), base = (uintptr_t)t;
	CHECK(key != FI_KEY_NOTAVAIL);
	memset(t, 0, R);
	fill(l, 250000, 31);
	CHECK_EQ(POST(fi_write(a.ep, l, 250000, fi_mr_desc(ml), a.peer, base + 4096, key, l), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK(check_fill(t + 4096, 250000, 31));
	memset(l, 0, R);
	CHECK_EQ(POST(fi_read(a.ep, l, 250000, fi_mr_desc(ml), a.peer, base + 4096, key, l), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK(check_fill(l, 250000, 31));
	/* A 0-based address is outside the region now; so is anything below
	 * its first byte or past its last. */
	REFUSED(&a, &b, 0, 100, 0, key, FI_EACCES, t, R, l);
	REFUSED(&a, &b, 1, 100, base - 1, key, FI_EACCES, t, R, l);
	REFUSED(&a, &b, 0, 100, base + R - 99, key, FI_EACCES, t, R, l);
	REFUSED(&a, &b, 0, 100, base, key ^ 1, FI_EINVAL, t, R, l);
	fi_close(&mt->fid);
	fi_close(&ml->fid);
	rma_pair_close(&a, &b);
	munmap(t, R);
	munmap(l, R);
}

/* An endpoint without FI_RMA: its own RMA calls are -FI_EOPNOTSUPP, and it
 * refuses to be a target (FI_EACCES) even for a registered key. */
TEST(endpoint_without_rma)
{
	struct end a, b;
	struct end_opts o = {.tx_op_flags = FI_DELIVERY_COMPLETE}; /* refusals reach the initiator */
	unsigned char t[256], l[256];
	struct fid_mr *mr;
	o.caps = FI_MSG | FI_RMA;
	CHECK_OK(end_open(&a, &o));
	o.caps = FI_MSG;
	CHECK_OK(end_open(&b, &o));
	CHECK_OK(ends_connect(&a, &b));
	CHECK_EQ(fi_write(b.ep, l, 8, NULL, b.peer, 0, KEY_RW, NULL), -FI_EOPNOTSUPP);
	CHECK_EQ(fi_read(b.ep, l, 8, NULL, b.peer, 0, KEY_RW, NULL), -FI_EOPNOTSUPP);
	CHECK_OK(fi_mr_reg(b.domain, t, sizeof(t), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mr, NULL));
	REFUSED(&a, &b, 0, 100, 0, KEY_RW, FI_EACCES, t, sizeof(t), l);
	REFUSED(&a, &b, 1, 100, 0, KEY_RW, FI_EACCES, t, sizeof(t), l);
	fi_close(&mr->fid);
	rma_pair_close(&a, &b);
}

/*
 * Completion levels (fi_cq(3) "Completion Semantics"): fi_writemsg and
 * fi_readmsg with no level, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE and
 * FI_DELIVERY_COMPLETE, on the eager path (64 B) and the large one
 * (1 MiB + 77: CMA on shm), the endpoints' default level being none. The
 * initiator first progresses alone, the target not at all:
 * - shm (and auto, same host), 64 B, any level but delivery complete: the
 *   write is complete already (its chunk is in the target's ring: transmit
 *   complete, docs/rma.md), before the target took it; the bytes arrive
 *   when the target progresses, although the source buffer was overwritten
 *   at once (the ring holds them);
 * - delivery complete, a large shm write (the target pulls it), and on tcp
 *   a named transmit or delivery complete (a socket buffer is not the
 *   peer's): no completion until the target answered; when the entry is
 *   read the bytes are in the target's memory, and the source is free.
 * tcp with no level or inject complete (docs/rma.md, Completions) completes
 * once its last record is in the kernel — at 64 B before the target
 * progressed (1 MiB may not fit the socket buffers); its bytes arrive
 * whole, the source overwritten. A read's bytes are in the local buffer
 * when its entry is read.
 */
TEST(completion_levels)
{
	static const uint64_t levels[] = {0, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE};
	static const size_t sizes[] = {64, BIG};
	struct end a, b;
	unsigned char *t = rma_region(BIG), *l = rma_region(BIG);
	struct fid_mr *mr;
	struct fi_cq_tagged_entry c;
	int tcp = !strcmp(rf_transport(), "tcp");
	CHECK(t && l);
	rma_tx_op_flags = 0;
	int r = rma_pair_open(&a, &b, PAIR_CAPS, 0, 0);
	rma_tx_op_flags = FI_DELIVERY_COMPLETE;
	CHECK_OK(r);
	CHECK_OK(fi_mr_reg(b.domain, t, BIG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mr, NULL));
	/* Connected first (on tcp the first record waits for the handshake,
	 * which needs the target). */
	CHECK_EQ(POST(fi_read(a.ep, l, 64, NULL, a.peer, 0, KEY_RW, l), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	unsigned seed = 40;
	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++, seed++) {
			size_t n = sizes[z];
			uint64_t level = levels[i];
			struct iovec iov = {.iov_base = l, .iov_len = n};
			struct fi_rma_iov seg = {.addr = 0, .len = n, .key = KEY_RW};
			struct fi_msg_rma m = {.msg_iov = &iov, .iov_count = 1, .addr = a.peer, .rma_iov = &seg,
					       .rma_iov_count = 1, .context = l};
			memset(t, 0, n);
			fill(l, n, seed);
			CHECK_EQ(POST(fi_writemsg(a.ep, &m, FI_COMPLETION | level), &a, NULL), 0);
			/* The initiator alone: what completes before the target took it. */
			for (int k = 0; k < 200; k++)
				poke1(&a);
			int early = a.nstash > 0;
			int must_wait = level == FI_DELIVERY_COMPLETE || (tcp ? level == FI_TRANSMIT_COMPLETE : n == BIG);
			if (early && must_wait)
				FAIL_AT("write of %zu B, level 0x%" PRIx64 ": completed before the target took it", n, level);
			if (!early && !tcp && !must_wait)
				FAIL_AT("write of %zu B, level 0x%" PRIx64 ": not complete once in the target's ring", n, level);
			if (!early && tcp && !must_wait && n != BIG)
				FAIL_AT("write of %zu B, level 0x%" PRIx64 ": not complete once written", n, level);
			if (early && check_fill(t, n, seed))
				FAIL_AT("write of %zu B, level 0x%" PRIx64 ": the target took it without progress", n, level);
			CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
			CHECK(c.op_context == l);
			CHECK_EQ(c.flags, FI_RMA | FI_WRITE);
			if (must_wait && !check_fill(t, n, seed))
				FAIL_AT("write of %zu B, level 0x%" PRIx64 ": completed before its bytes were at the target",
					n, level);
			memset(l, 0xee, n);
			if (!must_wait && !wait_bytes(&a, &b, t, n, seed))
				FAIL_AT("write of %zu B, level 0x%" PRIx64 ": its bytes never arrived whole", n, level);
			for (int k = 0; k < 200; k++)
				poke(&a, &b);
			if (!check_fill(t, n, seed))
				FAIL_AT("write of %zu B, level 0x%" PRIx64 ": the source buffer was read after completion",
					n, level);
			/* Read it back at the same level. */
			memset(l, 0, n);
			CHECK_EQ(POST(fi_readmsg(a.ep, &m, FI_COMPLETION | level), &a, &b), 0);
			CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
			CHECK_EQ(c.flags, FI_RMA | FI_READ);
			if (!check_fill(l, n, seed))
				FAIL_AT("read of %zu B, level 0x%" PRIx64 ": completed before its bytes were here", n,
					level);
		}
	}
	fi_close(&mr->fid);
	rma_pair_close(&a, &b);
	munmap(t, BIG);
	munmap(l, BIG);
}

/*
 * The other process of the two tests below is this program again, started
 * fresh (fork + exec: "test_rma --child target|idle <read fd> <write fd>"),
 * so that it holds nothing of the parent's earlier tests (under valgrind a
 * forked copy would report the parent's objects as its own leaks).
 *   target: registers BIG bytes filled with 77, sends its name, takes the
 *           parent's, waits for a "done" message, then exits 0 if the
 *           first BIG - 1000 bytes hold the fill of 78.
 *   idle:   registers 8 MiB, sends its name and never progresses again
 *           (blocks reading its pipe until killed).
 */
#define IDLE_SIZE (8 << 20)

static int child_main(const char *mode, int rfd, int wfd)
{
	struct end b;
	struct end_opts o = {.caps = FI_MSG | FI_RMA};
	int idle = !strcmp(mode, "idle");
	size_t size = idle ? IDLE_SIZE : BIG;
	unsigned char *t = rma_region(size);
	struct fid_mr *mr;
	char peer[128];
	size_t plen;
	int rc = 1;
	if (!t || end_open(&b, &o) ||
	    fi_mr_reg(b.domain, t, size, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mr, NULL))
		return 2;
	fill(t, size, 77);
	if (write(wfd, &b.addrlen, sizeof(b.addrlen)) < 0 || write(wfd, b.addr, b.addrlen) < 0)
		return 3;
	if (idle) {
		char c;
		return read(rfd, &c, 1) < 0 ? 4 : 0; /* no progress from here on */
	}
	if (read(rfd, &plen, sizeof(plen)) != sizeof(plen) || plen > sizeof(peer) ||
	    read(rfd, peer, plen) != (ssize_t)plen || fi_av_insert(b.av, peer, 1, &b.peer, 0, NULL) != 1)
		return 3;
	char done[8] = {0};
	if (fi_recv(b.ep, done, sizeof(done), NULL, FI_ADDR_UNSPEC, NULL))
		return 4;
	struct fi_cq_tagged_entry c;
	if (wait_comp(&b, NULL, &c, NULL, NULL, 60) == 1 && !strcmp(done, "done"))
		rc = check_fill(t, BIG - 1000, 78) ? 0 : 5;
	fi_close(&mr->fid);
	end_close(&b);
	munmap(t, size);
	return rc;
}

static char self_exe[4096];

/* Starts "this program --child mode" with pipes both ways: *to_child is
 * the write end to it, *from_child the read end from it. */
static pid_t spawn_child(const char *mode, int *to_child, int *from_child)
{
	int down[2], up[2];
	if (pipe(down) || pipe(up))
		return -1;
	pid_t pid = rf_fork();
	if (pid == 0) {
		char r[16], w[16];
		close(down[1]);
		close(up[0]);
		snprintf(r, sizeof(r), "%d", down[0]);
		snprintf(w, sizeof(w), "%d", up[1]);
		execl(self_exe, self_exe, "--child", mode, r, w, (char *)NULL);
		_exit(98);
	}
	close(down[0]);
	close(up[1]);
	*to_child = down[1];
	*from_child = up[0];
	return pid;
}

/* The target in another process (on shm the process_vm_* path between
 * kernel-verified peers): a large write and read, bytes checked on both
 * sides; then a refused one. Names and the key cross on pipes; "done"
 * is a message. */
TEST(target_in_another_process)
{
	int to_child, from_child;
	pid_t pid = spawn_child("target", &to_child, &from_child);
	CHECK(pid > 0);
	struct end a;
	struct end_opts o = {.caps = FI_MSG | FI_RMA};
	unsigned char *l = rma_region(BIG);
	char peer[128];
	size_t plen;
	struct fi_cq_tagged_entry c;
	CHECK(l);
	CHECK_OK(end_open(&a, &o));
	CHECK(read(from_child, &plen, sizeof(plen)) == sizeof(plen) && plen <= sizeof(peer));
	CHECK(read(from_child, peer, plen) == (ssize_t)plen);
	CHECK(fi_av_insert(a.av, peer, 1, &a.peer, 0, NULL) == 1);
	CHECK(write(to_child, &a.addrlen, sizeof(a.addrlen)) > 0 && write(to_child, a.addr, a.addrlen) > 0);
	/* Read the child's region. */
	memset(l, 0, BIG);
	CHECK_EQ(POST(fi_read(a.ep, l, BIG, NULL, a.peer, 0, KEY_RW, l), &a, NULL), 0);
	CHECK_EQ(rma_comp(&a, NULL, &c, NULL), 1);
	CHECK(check_fill(l, BIG, 77));
	/* Refused: past the end (nothing of the child's changes: it checks
	 * the fill of 78 below over BIG - 1000 bytes only, and we read the
	 * tail back). */
	struct fi_cq_err_entry err = {0};
	/* Transmit complete named: on tcp the refusal reaches us (with no
	 * level the write completes once written, docs/rma.md). */
	struct iovec wio = {l, BIG};
	struct fi_rma_iov wseg = {.addr = 1000, .len = BIG, .key = KEY_RW};
	struct fi_msg_rma wm = {.msg_iov = &wio, .iov_count = 1, .addr = a.peer, .rma_iov = &wseg,
				.rma_iov_count = 1, .context = l};
	CHECK_EQ(POST(fi_writemsg(a.ep, &wm, FI_COMPLETION | FI_TRANSMIT_COMPLETE), &a, NULL), 0);
	CHECK_EQ(rma_comp(&a, NULL, &c, &err), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_EACCES);
	/* Write most of it. */
	fill(l, BIG - 1000, 78);
	CHECK_EQ(POST(fi_write(a.ep, l, BIG - 1000, NULL, a.peer, 0, KEY_RW, l), &a, NULL), 0);
	CHECK_EQ(rma_comp(&a, NULL, &c, NULL), 1);
	/* The last 1000 bytes are still the child's fill of 77. */
	unsigned char tail[1000];
	CHECK_EQ(POST(fi_read(a.ep, tail, 1000, NULL, a.peer, BIG - 1000, KEY_RW, tail), &a, NULL), 0);
	CHECK_EQ(rma_comp(&a, NULL, &c, NULL), 1);
	{
		unsigned char *all = malloc(BIG);
		CHECK(all);
		fill(all, BIG, 77);
		int same = memcmp(tail, all + BIG - 1000, 1000) == 0;
		free(all);
		CHECK(same);
	}
	CHECK_EQ(POST(fi_send(a.ep, "done", 5, NULL, a.peer, NULL), &a, NULL), 0);
	CHECK_EQ(rma_comp(&a, NULL, &c, NULL), 1);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	end_close(&a);
	munmap(l, BIG);
	close(to_child);
	close(from_child);
}

/* A target that dies while operations wait on it: a large write and a
 * large read are posted to a child that never progresses (it blocks on a
 * pipe), then the child is killed. Both complete in error
 * (FI_ECONNRESET), nothing hangs, and the endpoint still works with
 * another peer. */
TEST(peer_killed_during_transfer)
{
	enum { N = IDLE_SIZE };
	int to_child, from_child;
	pid_t pid = spawn_child("idle", &to_child, &from_child);
	CHECK(pid > 0);
	struct end a, c2;
	struct end_opts o = {.caps = FI_MSG | FI_RMA, .tx_op_flags = FI_DELIVERY_COMPLETE};
	unsigned char *w = rma_region(N), *r = rma_region(N);
	char peer[128];
	size_t plen;
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	CHECK(w && r);
	CHECK_OK(end_open(&a, &o));
	CHECK(read(from_child, &plen, sizeof(plen)) == sizeof(plen) && plen <= sizeof(peer));
	CHECK(read(from_child, peer, plen) == (ssize_t)plen);
	CHECK(fi_av_insert(a.av, peer, 1, &a.peer, 0, NULL) == 1);
	fill(w, N, 5);
	CHECK_EQ(POST(fi_write(a.ep, w, N, NULL, a.peer, 0, KEY_RW, w), &a, NULL), 0);
	CHECK_EQ(POST(fi_read(a.ep, r, N, NULL, a.peer, 0, KEY_RW, r), &a, NULL), 0);
	/* Progress for a while: nothing can complete. */
	for (int i = 0; i < 2000; i++)
		poke1(&a);
	CHECK_EQ(a.nstash, 0);
	CHECK(kill(pid, SIGKILL) == 0);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	int seen = 0;
	for (int k = 0; k < 2; k++) {
		memset(&err, 0, sizeof(err));
		CHECK_EQ(wait_comp(&a, NULL, &c, &err, NULL, 60), -FI_EAVAIL);
		CHECK_EQ(err.err, FI_ECONNRESET);
		seen |= err.op_context == w ? 1 : err.op_context == r ? 2 : 4;
	}
	CHECK_EQ(seen, 3);
	/* The endpoint still works: RMA with a new peer. */
	unsigned char t2[4096];
	struct fid_mr *mr2;
	CHECK_OK(end_open(&c2, &o));
	CHECK_OK(ends_connect(&a, &c2));
	CHECK_OK(fi_mr_reg(c2.domain, t2, sizeof(t2), FI_REMOTE_WRITE, 0, KEY_WO, 0, &mr2, NULL));
	CHECK_EQ(POST(fi_write(a.ep, w, 4096, NULL, a.peer, 0, KEY_WO, NULL), &a, &c2), 0);
	CHECK_EQ(rma_comp(&a, &c2, &c, NULL), 1);
	CHECK(check_fill(t2, 4096, 5));
	fi_close(&mr2->fid);
	end_close(&c2);
	end_close(&a);
	munmap(w, N);
	munmap(r, N);
	close(to_child);
	close(from_child);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "--child"))
		return child_main(argv[2], atoi(argv[3]), atoi(argv[4]));
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0)
		return 1;
	self_exe[n] = 0;
	harness_init(argc, argv);
	RUN(write_read_sizes);
	RUN(vectors_and_segments);
	RUN(inject_and_remote_data);
	RUN(access_violations);
	RUN(completion_levels);
	RUN(virt_addr_prov_key);
	RUN(endpoint_without_rma);
	RUN(target_in_another_process);
	RUN(peer_killed_during_transfer);
	return harness_done();
}
