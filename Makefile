# rustfab — build, install, demo and test a libfabric provider written in Rust.
# `make demo` shows it working; `make test` runs every test (see README).

CARGO    ?= cargo
CC       ?= cc
BUILD    := build
LIB      := $(BUILD)/librustfab-fi.so
LIBDIR   := $(shell pkg-config --variable=libdir libfabric 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
PROVDIR  ?= $(LIBDIR)/libfabric
# The header goes next to libfabric's own <rdma/*.h>.
INCDIR   := $(shell pkg-config --variable=includedir libfabric 2>/dev/null || echo /usr/include)
CFLAGS   ?= -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter
TIMEOUT  ?= timeout
# The one version (Cargo.toml) and its release date (CHANGELOG.md).
VERSION  := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
RELEASE_DATE := $(shell sed -n 's/^\#\# \[$(VERSION)\] - \([0-9-]*\).*/\1/p' CHANGELOG.md | head -n 1)
PREFIX   := $(shell pkg-config --variable=prefix libfabric 2>/dev/null || echo /usr)
MANDIR   ?= $(PREFIX)/share/man
export FI_PROVIDER_PATH := $(CURDIR)/$(BUILD)

.PHONY: all lib install uninstall deb deb-changelog deb-changelog-check deb-check demo test unit abi-check exports-check header header-check man man-check params-check \
        c-tests c-tests-tcp examples netns netns-links bench-links shmfull fabtests mpi mpi5 mpi-hosts scale scale-mpi bench bench-hosts bench-insns readme-check bench-idle bench-mpi fmt lint clean panic-test \
        memcheck asan stress soak soak-short fuzz fuzz-corpus loom miri

all: lib

# Cargo names the cdylib librustfab.so; libfabric loads only files ending in
# "fi.so" from FI_PROVIDER_PATH, so the build directory gets the conventional
# name lib<prov>-fi.so. The copy is renamed into place: processes that have
# the old library mapped (a test or benchmark still running) keep their
# file instead of seeing its code overwritten under them.
lib:
	$(CARGO) build --release --lib
	@mkdir -p $(BUILD)
	cp -f target/release/librustfab.so $(LIB).tmp && mv -f $(LIB).tmp $(LIB)

install: lib
	install -d $(DESTDIR)$(PROVDIR) $(DESTDIR)$(INCDIR)/rdma $(DESTDIR)$(MANDIR)/man7
	install -m 0755 $(LIB) $(DESTDIR)$(PROVDIR)/librustfab-fi.so
	install -m 0644 $(HEADER) $(DESTDIR)$(INCDIR)/rdma/fi_ext_rustfab.h
	install -m 0644 $(MAN) $(DESTDIR)$(MANDIR)/man7/fi_rustfab.7

uninstall:
	rm -f $(DESTDIR)$(PROVDIR)/librustfab-fi.so $(DESTDIR)$(INCDIR)/rdma/fi_ext_rustfab.h \
	      $(DESTDIR)$(MANDIR)/man7/fi_rustfab.7
	@# the provider directory, if install created it and nothing else is in it
	@[ ! -d $(DESTDIR)$(PROVDIR) ] || rmdir --ignore-fail-on-non-empty $(DESTDIR)$(PROVDIR)

# ---- Debian packages: the source package in debian/, built by
# dpkg-buildpackage -us -uc -b (debhelper; debian/rules calls make lib and
# make install): rustfab (the provider), rustfab-dev (header and man page)
# and rustfab-dbgsym. dpkg-buildpackage writes into the directory above the
# tree; make deb moves the packages into build/ and lints them.
DEB_ARCH       := $(shell dpkg --print-architecture 2>/dev/null)
DEB            := $(BUILD)/rustfab_$(VERSION)_$(DEB_ARCH).deb
DEB_DEV        := $(BUILD)/rustfab-dev_$(VERSION)_$(DEB_ARCH).deb
DEB_DBGSYM     := $(BUILD)/rustfab-dbgsym_$(VERSION)_$(DEB_ARCH).deb
DEB_MAINTAINER := $(shell sed -n 's/^Maintainer: //p' debian/control | head -n 1)
export VERSION PROVDIR INCDIR MANDIR DEB DEB_DEV DEB_DBGSYM

deb: deb-changelog-check
	dpkg-buildpackage -us -uc -b
	@mkdir -p $(BUILD)
	mv -f ../rustfab_$(VERSION)_$(DEB_ARCH).deb ../rustfab-dev_$(VERSION)_$(DEB_ARCH).deb \
	      ../rustfab-dbgsym_$(VERSION)_$(DEB_ARCH).deb ../rustfab_$(VERSION)_$(DEB_ARCH).changes \
	      ../rustfab_$(VERSION)_$(DEB_ARCH).buildinfo $(BUILD)/
	@if command -v lintian >/dev/null; then lintian --fail-on error,warning $(BUILD)/rustfab_$(VERSION)_$(DEB_ARCH).changes && echo "deb: lintian: no errors or warnings"; \
	else echo "deb: lintian not installed, packages not linted"; fi

# debian/changelog is CHANGELOG.md in Debian's format (packaging/changelog.sh),
# committed because dpkg-buildpackage reads the version from it.
deb-changelog:
	packaging/changelog.sh CHANGELOG.md "$(DEB_MAINTAINER)" > debian/changelog

deb-changelog-check:
	@mkdir -p $(BUILD)
	@packaging/changelog.sh CHANGELOG.md "$(DEB_MAINTAINER)" > $(BUILD)/changelog.debian
	@diff -u debian/changelog $(BUILD)/changelog.debian || \
	  { echo "deb: debian/changelog is not CHANGELOG.md's: run make deb-changelog and commit it"; exit 1; }

# Installs the packages, checks what a user would (fi_info without
# FI_PROVIDER_PATH, man, the header, an Open MPI job with the man page's
# command line), removes them and checks nothing is left. Needs root (CI);
# skips otherwise.
deb-check: deb $(BUILD)/mpi/hello
	packaging/deb-check.sh $(BUILD)/mpi/hello

# What rustfab is, its fi_info entries, and a ping-pong over rustfab's shm
# and libfabric's built-in shm side by side, in words (c-tests/bench/demo.sh).
demo: lib $(BUILD)/bench/rf_bench
	@echo
	@$(TIMEOUT) 120 c-tests/bench/demo.sh $(BUILD)/bench/rf_bench

test: lint unit loom abi-check exports-check header-check man-check params-check c-tests memcheck netns shmfull panic-test mpi mpi5 mpi-hosts soak-short

unit:
	$(CARGO) test --release

# The ABI mirror proof: the same table, printed by Rust and by a C program
# compiled against the installed <rdma/*.h>, must be identical. The perturbed
# run proves the comparison can fail.
abi-check:
	@mkdir -p $(BUILD)
	$(CARGO) run --release -q --bin abi-dump -- c > $(BUILD)/abi_dump.c
	$(CC) $(CFLAGS) -o $(BUILD)/abi_dump $(BUILD)/abi_dump.c
	$(BUILD)/abi_dump > $(BUILD)/abi.c.txt
	$(CARGO) run --release -q --bin abi-dump -- rust > $(BUILD)/abi.rust.txt
	diff -u $(BUILD)/abi.c.txt $(BUILD)/abi.rust.txt
	$(CARGO) run --release -q --bin abi-dump -- rust --perturb > $(BUILD)/abi.perturbed.txt
	@if diff -q $(BUILD)/abi.c.txt $(BUILD)/abi.perturbed.txt >/dev/null; then \
	  echo "abi-check: a perturbed mirror was not detected"; exit 1; fi
	@echo "abi-check: $$(grep -c '^STRUCT' $(BUILD)/abi.c.txt) structs, $$(grep -c 'FIELD' $(BUILD)/abi.c.txt) fields, $$(grep -c '^CONST' $(BUILD)/abi.c.txt) constants match the installed headers"
	@# What libfabric 1.18-2.6 changed (src/abi/v2.rs): against the facts
	@# printed from 2.6.0's headers (tests/abi/libfabric-2.6.txt), and against
	@# the headers themselves when LIBFABRIC2_PREFIX names an installed 2.6.
	$(CARGO) run --release -q --bin abi-dump -- rust --api 2.6 > $(BUILD)/abi2.rust.txt
	grep -v '^#' tests/abi/libfabric-2.6.txt | diff -u - $(BUILD)/abi2.rust.txt
	@if [ -n "$(LIBFABRIC2_PREFIX)" ]; then \
	  $(CARGO) run --release -q --bin abi-dump -- c --api 2.6 > $(BUILD)/abi_dump2.c && \
	  $(CC) $(CFLAGS) -I$(LIBFABRIC2_PREFIX)/include -o $(BUILD)/abi_dump2 $(BUILD)/abi_dump2.c && \
	  $(BUILD)/abi_dump2 | diff -u - $(BUILD)/abi2.rust.txt && \
	  echo "abi-check: the 2.6 mirror matches $(LIBFABRIC2_PREFIX)/include"; \
	else echo "abi-check: 2.6 mirror checked against tests/abi/libfabric-2.6.txt (set LIBFABRIC2_PREFIX to check it against 2.6 headers too)"; fi

# Only fi_prov_ini may be exported.
exports-check: lib
	@syms=$$(nm -D --defined-only $(LIB) | awk '{print $$3}' | sort -u); \
	if [ "$$syms" != "fi_prov_ini" ]; then echo "exports-check: unexpected exports:"; echo "$$syms"; exit 1; fi; \
	echo "exports-check: only fi_prov_ini is exported"

# <rdma/fi_ext_rustfab.h>, generated by cbindgen from src/capi.rs and
# cbindgen.toml. The cbindgen is Debian bookworm's (apt, the version .ci/run
# installs): another version may write the header differently, so it is
# refused rather than silently used. Anything cbindgen prints (a warning is
# usually an item it skipped) fails the target.
HEADER           := include/rdma/fi_ext_rustfab.h
CBINDGEN         ?= cbindgen
CBINDGEN_VERSION := 0.24.3
define cbindgen_run
	@v=$$($(CBINDGEN) --version 2>/dev/null | awk '{print $$2}'); \
	if [ "$$v" != "$(CBINDGEN_VERSION)" ]; then \
	  echo "$@: cbindgen $(CBINDGEN_VERSION) is required, found '$${v:-none}' (apt-get install cbindgen on Debian bookworm)"; exit 1; fi
	@mkdir -p $(BUILD)
	@$(CBINDGEN) --config cbindgen.toml src/capi.rs -o $(1) 2>$(BUILD)/cbindgen.log; rc=$$?; \
	if [ $$rc -ne 0 ] || [ -s $(BUILD)/cbindgen.log ]; then \
	  echo "$@: cbindgen failed (exit $$rc) or warned:"; cat $(BUILD)/cbindgen.log; exit 1; fi
endef

header:
	$(call cbindgen_run,$(HEADER))
	@echo "header: wrote $(HEADER)"

header-check:
	$(call cbindgen_run,$(BUILD)/fi_ext_rustfab.h.new)
	@diff -u $(HEADER) $(BUILD)/fi_ext_rustfab.h.new || \
	  { echo "header-check: $(HEADER) is out of date: run make header and commit it"; exit 1; }
	@echo "header-check: $(HEADER) is up to date (cbindgen $(CBINDGEN_VERSION))"

# The man page: man/fi_rustfab.7.md (libfabric's markdown form) is the
# source; the roff page man/fi_rustfab.7 is generated by pandoc (man/md2man.sh)
# and committed, so building and installing need no pandoc. man-check
# regenerates it and fails if the committed page drifted, or if a parameter
# of the header (FI_RUSTFAB_ENV_*) is not documented; without pandoc it says
# so and skips (CI installs pandoc, so CI never skips).
MAN_SRC := man/fi_rustfab.7.md
MAN     := man/fi_rustfab.7

man:
	@[ -n "$(RELEASE_DATE)" ] || { echo "man: CHANGELOG.md has no '## [$(VERSION)] - <date>' entry"; exit 1; }
	man/md2man.sh $(MAN_SRC) $(VERSION) $(RELEASE_DATE) > $(MAN).tmp && mv -f $(MAN).tmp $(MAN)

man-check: lib
	@FI_PROVIDER_PATH=$(CURDIR)/$(BUILD) man/entries.sh --check $(MAN_SRC)
	@FI_PROVIDER_PATH=$(CURDIR)/$(BUILD) man/entries.sh --check-control debian/control
	@for p in $$(sed -n 's/^#define FI_RUSTFAB_ENV_[A-Z_]* "\(.*\)"$$/\1/p' $(HEADER)); do \
	  grep -q "^\*$$p\*$$" $(MAN_SRC) || { echo "man-check: $$p is not described in $(MAN_SRC) (RUNTIME PARAMETERS)"; exit 1; }; \
	done
	@[ -n "$(RELEASE_DATE)" ] || { echo "man-check: CHANGELOG.md has no '## [$(VERSION)] - <date>' entry"; exit 1; }
	@if ! command -v pandoc >/dev/null; then \
	  . c-tests/skip.sh; skip "man-check: pandoc is not installed (apt-get install pandoc), $(MAN) not compared with $(MAN_SRC)"; fi; \
	mkdir -p $(BUILD) && man/md2man.sh $(MAN_SRC) $(VERSION) $(RELEASE_DATE) > $(BUILD)/fi_rustfab.7 && \
	{ diff -u $(MAN) $(BUILD)/fi_rustfab.7 || { echo "man-check: $(MAN) is out of date: run make man and commit it"; exit 1; }; } && \
	echo "man-check: $(MAN) matches $(MAN_SRC) (rustfab $(VERSION), $(RELEASE_DATE), $$(pandoc --version | head -n 1))"
	@if command -v man >/dev/null; then \
	  w=$$(LC_ALL=C.UTF-8 MANROFFSEQ= man --warnings -l $(MAN) 2>&1 >/dev/null); \
	  [ -z "$$w" ] || { echo "man-check: groff warns about $(MAN):"; echo "$$w"; exit 1; }; fi

# What fi_info shows of the parameters: the settings in effect at
# FI_LOG_LEVEL=info, one warning per bad, replaced or clamped value, naming
# the line that decided it (c-tests/params/run.sh).
params-check: lib
	c-tests/params/run.sh

fmt:
	$(CARGO) fmt

lint: readme-check
	.ci/setup-check
	$(CARGO) fmt --check
	$(CARGO) clippy --release --all-targets -- -D warnings

# The README's performance table is c-tests/bench/table.sh's output for the
# dated run (docs/bench/DATE) it names; c-tests/bench/publish.sh keeps a run.
readme-check:
	c-tests/bench/readme-check.sh

clean:
	$(CARGO) clean
	rm -rf $(BUILD)

# ---- C tests: every c-tests/test_*.c is one program, linked only to libfabric.
C_TEST_SRCS := $(wildcard c-tests/test_*.c)
C_TEST_BINS := $(patsubst c-tests/%.c,$(BUILD)/c-tests/%,$(C_TEST_SRCS))

# -Iinclude: the tests see this tree's <rdma/fi_ext_rustfab.h>, not an
# installed one.
$(BUILD)/c-tests/%: c-tests/%.c c-tests/harness.h c-tests/rdm_common.h c-tests/flood_common.h $(HEADER)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude -o $@ $< -lfabric -lpthread

c-tests: lib $(C_TEST_BINS)
	c-tests/run.sh $(BUILD)/c-tests
	$(MAKE) --no-print-directory c-tests-tcp
	$(MAKE) --no-print-directory examples

# The transport-parametrized RDM suite again, over tcp and auto (test_tcp
# always runs over tcp), and the connected-endpoint one (test_msg: shm in the
# first run, then tcp and auto here; test_restart likewise). Endpoints bound to a wildcard advertise loopback here, so the
# tests' traffic stays on 127.0.0.1 whatever interfaces the host has.
# Last, test_rdm and test_shm over shm with the split rendezvous off (it is
# on by default, docs/shm.md "Large messages"): 1-32 MiB messages pulled by
# the receiver alone, as FI_RUSTFAB_SHM_SPLIT_MIN=0 and valgrind have them.
c-tests-tcp: lib $(BUILD)/c-tests/test_shm $(BUILD)/c-tests/test_rdm $(BUILD)/c-tests/test_threads $(BUILD)/c-tests/test_buffered $(BUILD)/c-tests/test_rma \
             $(BUILD)/c-tests/test_atomic $(BUILD)/c-tests/test_msg $(BUILD)/c-tests/test_close_wait $(BUILD)/c-tests/test_restart \
             $(BUILD)/c-tests/test_prefix $(BUILD)/c-tests/test_trigger $(BUILD)/c-tests/test_shared_av $(BUILD)/c-tests/test_scalable \
             $(BUILD)/c-tests/test_dgram $(BUILD)/c-tests/test_shared_ctx
	@mkdir -p $(BUILD)/c-tests-tcp
	ln -sf ../c-tests/test_trigger $(BUILD)/c-tests-tcp/test_trigger
	ln -sf ../c-tests/test_shared_av $(BUILD)/c-tests-tcp/test_shared_av
	ln -sf ../c-tests/test_scalable $(BUILD)/c-tests-tcp/test_scalable
	ln -sf ../c-tests/test_dgram $(BUILD)/c-tests-tcp/test_dgram
	ln -sf ../c-tests/test_shared_ctx $(BUILD)/c-tests-tcp/test_shared_ctx
	ln -sf ../c-tests/test_prefix $(BUILD)/c-tests-tcp/test_prefix
	ln -sf ../c-tests/test_restart $(BUILD)/c-tests-tcp/test_restart
	ln -sf ../c-tests/test_msg $(BUILD)/c-tests-tcp/test_msg
	ln -sf ../c-tests/test_rma $(BUILD)/c-tests-tcp/test_rma
	ln -sf ../c-tests/test_atomic $(BUILD)/c-tests-tcp/test_atomic
	ln -sf ../c-tests/test_rdm $(BUILD)/c-tests-tcp/test_rdm
	ln -sf ../c-tests/test_threads $(BUILD)/c-tests-tcp/test_threads
	ln -sf ../c-tests/test_buffered $(BUILD)/c-tests-tcp/test_buffered
	ln -sf ../c-tests/test_close_wait $(BUILD)/c-tests-tcp/test_close_wait
	RF_TRANSPORT=tcp FI_RUSTFAB_IFACE=lo c-tests/run.sh $(BUILD)/c-tests-tcp
	RF_TRANSPORT=auto FI_RUSTFAB_IFACE=lo c-tests/run.sh $(BUILD)/c-tests-tcp
	@mkdir -p $(BUILD)/c-tests-nosplit
	ln -sf ../c-tests/test_rdm $(BUILD)/c-tests-nosplit/test_rdm
	ln -sf ../c-tests/test_shm $(BUILD)/c-tests-nosplit/test_shm
	FI_RUSTFAB_SHM_SPLIT_MIN=0 c-tests/run.sh $(BUILD)/c-tests-nosplit

# ---- examples shown in the README (c-tests/examples/*.c): built and run
# over every transport by `make c-tests`; each exits 0 on success.
EXAMPLE_SRCS := $(wildcard c-tests/examples/*.c)
EXAMPLE_BINS := $(patsubst c-tests/examples/%.c,$(BUILD)/examples/%,$(EXAMPLE_SRCS))

$(BUILD)/examples/%: c-tests/examples/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

examples: lib $(EXAMPLE_BINS)
	@for e in $(EXAMPLE_BINS); do for t in shm tcp auto; do \
	  echo "== $$(basename $$e) ($$t)"; \
	  RF_TRANSPORT=$$t FI_RUSTFAB_IFACE=lo FI_PROVIDER=rustfab $(TIMEOUT) 60 $$e || exit 1; \
	done; done

# ---- memory checking: the C test programs (over shm; the RDM, thread and
# buffered ones over tcp and auto too), rf_bench ping-pongs and a short
# rf_stress run, every process under valgrind memcheck; any error, or a
# definite or indirect leak, fails (c-tests/valgrind/run.sh says what counts
# and why; suppressions, libfabric/glibc/ld.so only, in
# c-tests/valgrind/rustfab.supp). Part of make test (~2-3 minutes).
memcheck: lib $(C_TEST_BINS) $(BUILD)/bench/rf_bench $(BUILD)/stress/rf_stress
	c-tests/valgrind/run.sh $(BUILD)

# ---- AddressSanitizer + UndefinedBehaviorSanitizer on the C side (not part
# of make test): the C tests and rf_stress built with -fsanitize, run over shm
# (all) and tcp/auto (the transport-parametrized ones). It catches what
# memcheck cannot in the C programs (overruns of stack and global arrays,
# undefined behaviour); rustfab itself is not instrumented, but its heap is
# ASan's and its memcpy/read calls into application buffers are checked.
ASAN_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
               -Wall -Wextra -Werror -Wno-unused-parameter
ASAN_BINS   := $(patsubst c-tests/%.c,$(BUILD)/asan/c-tests/%,$(C_TEST_SRCS)) $(BUILD)/asan/stress/rf_stress

$(BUILD)/asan/c-tests/%: c-tests/%.c c-tests/harness.h c-tests/rdm_common.h c-tests/flood_common.h $(HEADER)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -Iinclude -o $@ $< -lfabric -lpthread

$(BUILD)/asan/stress/rf_stress: c-tests/stress/rf_stress.c
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -o $@ $< -lfabric -lpthread

asan: lib $(ASAN_BINS)
	ASAN_OPTIONS=detect_leaks=1 c-tests/run.sh $(BUILD)/asan/c-tests
	@mkdir -p $(BUILD)/asan/c-tests-tcp
	for t in test_rdm test_threads test_buffered; do ln -sf ../c-tests/$$t $(BUILD)/asan/c-tests-tcp/$$t; done
	RF_TRANSPORT=tcp FI_RUSTFAB_IFACE=lo c-tests/run.sh $(BUILD)/asan/c-tests-tcp
	RF_TRANSPORT=auto FI_RUSTFAB_IFACE=lo c-tests/run.sh $(BUILD)/asan/c-tests-tcp
	for t in shm tcp auto; do FI_PROVIDER=rustfab FI_RUSTFAB_IFACE=lo $(TIMEOUT) 300 \
	  $(BUILD)/asan/stress/rf_stress -t $$t -p 4 -n 3 -d 5 -T 200 || exit 1; done

# ---- make stress (not part of make test; ~5 minutes): rf_stress over shm, tcp
# and auto, with every byte checked, after showing that its checks catch a
# planted fault; with FABTESTS_PREFIX (an installed fabtests 1.17), also
# fi_ubertest with the sockets provider's configurations (prov_name rewritten
# at run time) and fi_rdm_stress (c-tests/stress/run.sh).
$(BUILD)/stress/rf_stress: c-tests/stress/rf_stress.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric -lpthread

stress: lib $(BUILD)/stress/rf_stress
	c-tests/stress/run.sh $(BUILD)

# ---- make soak (not part of make test; ~4.5 minutes): one long-lived server
# under mixed traffic (echoed messages and tagged messages, RMA written and
# read back, fetching atomics, every byte checked) from a witness client,
# normal clients killed (SIGKILL) and restarted at random, a slow reader and
# a flooder, over shm, tcp and auto, SOAK_SECONDS (default 60) each; the
# server's RSS, descriptors and this run's /dev/shm segments sampled every
# half second and bounded (c-tests/soak/run.sh says which bounds; samples in
# build/soak/<transport>.csv). First, each check is shown to fail on a
# planted fault (SOAK_PLANT). soak-short (make test): 12 s per transport,
# no planted faults.
$(BUILD)/soak/rf_soak: c-tests/soak/rf_soak.c c-tests/rdm_common.h c-tests/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric -lpthread

SOAK_SECONDS ?= 60
soak: lib $(BUILD)/soak/rf_soak
	@for p in fdleak:descriptors corrupt:CORRUPT noreap:'segment(s) of killed clients left' rss:'heap (RssAnon) grew'; do \
	  what=$${p#*:}; p=$${p%%:*}; \
	  echo "== soak self-check: planted $$p must fail"; \
	  SOAK_PLANT=$$p SOAK_SECONDS=8 SOAK_TRANSPORTS=shm SOAK_DEAD_MAPS=1000 $(TIMEOUT) 300 \
	    c-tests/soak/run.sh $(BUILD) >$(BUILD)/soak/plant-$$p.log 2>&1; \
	  grep "^FAIL.*$$what" $(BUILD)/soak/plant-$$p.log | head -n 1 | grep . || \
	    { echo "soak: the planted $$p was not caught ($(BUILD)/soak/plant-$$p.log)"; exit 1; }; done
	SOAK_SECONDS=$(SOAK_SECONDS) $(TIMEOUT) $$((3 * $(SOAK_SECONDS) + 600)) c-tests/soak/run.sh $(BUILD)

soak-short: lib $(BUILD)/soak/rf_soak
	SOAK_SECONDS=12 $(TIMEOUT) 400 c-tests/soak/run.sh $(BUILD)

# ---- loom models of the shm ring and the wake-up handshake
# (src/transport/shm/sync.rs) and of a CQ's slot accounting and empty-read
# flag under FI_THREAD_SAFE (src/core/cq_queue.rs), the code the provider
# runs, in a --cfg loom build of its own target directory; the models take
# about half a minute, the build a couple of minutes from clean. Part of
# make test.
loom:
	CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" $(TIMEOUT) 900 $(CARGO) test --lib -- \
	  transport::shm::sync::models transport::shm::ready::models core::cq_queue::models

# ---- Miri (not part of make test: needs a nightly toolchain with the miri
# component): the unit tests of the pure-Rust modules (no FFI, no system
# calls) under the interpreter, failing on undefined behaviour
# (c-tests/miri.sh says which modules and why; docs/testing.md). Without
# nightly Miri it says so and fails.
miri:
	$(TIMEOUT) 3600 c-tests/miri.sh

# ---- fuzzing (not part of make test): the cargo-fuzz targets of fuzz/, each
# for FUZZ_SECONDS (default 60), with nightly + cargo-fuzz; without them the
# same harness bodies (src/fuzzing.rs) as property tests with more cases
# (fuzz/run.sh; docs/testing.md). make test runs them bounded (cargo test).
FUZZ_SECONDS ?= 60
export FUZZ_SECONDS
fuzz:
	fuzz/run.sh

# Rewrites the seed corpus fuzz/corpus/<target>/ from real frames
# (rustfab::fuzzing::seeds; cargo test fails while it differs).
fuzz-corpus:
	$(CARGO) test --release --lib fuzzing::tests::write_seed_corpus -- --ignored

# ---- between hosts: two network namespaces joined by a veth pair, one rustfab
# process in each (needs root; prints SKIP and succeeds without it).
$(BUILD)/netns/rdm_pair: c-tests/netns/rdm_pair.c c-tests/netns/oob.h c-tests/harness.h c-tests/rdm_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

$(BUILD)/netns/msg_pair: c-tests/netns/msg_pair.c c-tests/netns/oob.h c-tests/harness.h c-tests/rdm_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

$(BUILD)/netns/links_pair: c-tests/netns/links_pair.c c-tests/netns/oob.h c-tests/harness.h c-tests/rdm_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

netns: lib $(BUILD)/netns/rdm_pair $(BUILD)/netns/msg_pair $(BUILD)/netns/links_pair
	c-tests/netns/run.sh $(BUILD)
	c-tests/netns/links.sh $(BUILD)

# Two links between two namespaces (FI_RUSTFAB_TCP_LINKS): striping, a link
# lost mid-transfer, a link back.
netns-links: lib $(BUILD)/netns/links_pair
	c-tests/netns/links.sh $(BUILD)

# Streaming bandwidth over one link against two, each shaped with tc tbf
# (LINKS_RATE, default 1gbit; needs root and fabtests).
bench-links: lib
	c-tests/bench/links.sh $(BUILD)

# ---- a full /dev/shm: rf_stress over shm in a mount namespace whose /dev/shm
# is a small tmpfs (needs root; prints SKIP and succeeds without it): the
# sends fail with -FI_ENOMEM or stay within the pages they have, never a
# SIGBUS (docs/shm.md "Memory").
shmfull: lib $(BUILD)/stress/rf_stress
	c-tests/shmfull/run.sh $(BUILD)

# ---- upstream fabtests (installed separately; see fabtests-integration/run.sh)
FT_SETS ?= foundation cq
# Every transport runs, whatever an earlier one gave; the target fails if any
# failed (or found no fabtests: run.sh's exit 77).
FT_TRANSPORTS ?= shm tcp auto
fabtests: lib
	@rc=0; for t in $(FT_TRANSPORTS); do fabtests-integration/run.sh $$t $(FT_SETS) || rc=1; done; \
	[ $$rc -eq 0 ] || { echo "fabtests: a transport failed (see above)"; exit 1; }

# ---- benchmarks: rustfab vs the built-in providers in one run (not part of `test`)
# -Wno-psabi: gcc notes an ABI change of GCC 4.4 (a struct with a flexible
# array member returned by value), irrelevant here and confusing in make demo.
$(BUILD)/bench/rf_bench: c-tests/bench/rf_bench.c c-tests/bench/bench_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-psabi -o $@ $< -lfabric

# One-sided rates without fabtests (docs/performance-history.md, RMA and atomics):
# `make build/bench/rf_rma`, then e.g. FI_PROVIDER_PATH=build FI_PROVIDER=rustfab
# build/bench/rf_rma -o sum.
$(BUILD)/bench/rf_rma: c-tests/bench/rf_rma.c c-tests/bench/bench_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

# Then, with FABTESTS_PREFIX (a fabtests 1.17 install), rustfab shm and tcp
# against the fastest peers with fabtests' own ping-pong and bandwidth tests:
# libfabric 1.17 shm and tcp;ofi_rxm, 2.x shm/sm2/tcp;ofi_rxm with
# LIBFABRIC2_PREFIX (2.x native tcp also needs FABTESTS2_PREFIX), UCX
# ucx_perftest when installed; CSV in $(BUILD)/bench/peers.csv
# (c-tests/bench/peers.sh; it says so when FABTESTS_PREFIX is not set).
# Last, instructions per small-message round trip (valgrind callgrind over
# rf_insns: one thread, two endpoints, no waiting, so the count does not
# depend on machine load) for rustfab shm, 1.17 shm and, with
# LIBFABRIC2_PREFIX, 2.x shm and sm2 (c-tests/bench/insns.sh; also
# `make bench-insns` alone).
# Then Open MPI ping-pong, 2 ranks bound to cores, 1 B ... 1 MiB: rustfab
# (pml cm + mtl ofi, auto) next to ob1+vader and pml ucx; CSV in
# $(BUILD)/bench/mpi.csv (c-tests/bench/mpi.sh; also `make bench-mpi`
# alone; without Open MPI it says so). Last, with gnuplot, latency.png and
# bandwidth.png against size from both CSVs (c-tests/bench/plot.sh).
bench: lib $(BUILD)/bench/rf_bench $(BUILD)/bench/rf_insns
	BENCH_OUT=$(CURDIR)/$(BUILD)/bench c-tests/bench/run.sh $(BUILD)/bench/rf_bench
	BENCH_OUT=$(CURDIR)/$(BUILD)/bench c-tests/bench/peers.sh
	@if command -v mpicc >/dev/null; then $(MAKE) --no-print-directory $(BUILD)/mpi-hosts/pingpong; fi
	BENCH_OUT=$(CURDIR)/$(BUILD)/bench c-tests/bench/mpi.sh $(CURDIR)/$(BUILD)/mpi-hosts/pingpong
	BENCH_OUT=$(CURDIR)/$(BUILD)/bench c-tests/bench/insns.sh $(BUILD)/bench/rf_insns
	BENCH_OUT=$(CURDIR)/$(BUILD)/bench c-tests/bench/plot.sh

# Open MPI between two hosts (network namespaces joined by a veth pair, as
# is and shaped to a NIC's rate with tc tbf): rustfab next to pml ucx over
# tcp, ob1 + btl tcp and tcp;ofi_rxm, ping-pong and streaming, 1 B-4 MiB;
# CSV in $(BUILD)/bench/hosts.csv, plotted with the rest (root; not part of
# make test: c-tests/bench/hosts.sh).
bench-hosts: lib $(BUILD)/mpi-hosts/pingpong
	BENCH_OUT=$(CURDIR)/$(BUILD)/bench c-tests/bench/hosts.sh $(BUILD)
	BENCH_OUT=$(CURDIR)/$(BUILD)/bench c-tests/bench/plot.sh

bench-mpi: lib $(BUILD)/mpi-hosts/pingpong
	BENCH_OUT=$(CURDIR)/$(BUILD)/bench c-tests/bench/mpi.sh $(CURDIR)/$(BUILD)/mpi-hosts/pingpong

$(BUILD)/bench/rf_insns: c-tests/bench/rf_insns.c c-tests/bench/bench_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

bench-insns: lib $(BUILD)/bench/rf_insns
	BENCH_OUT=$(CURDIR)/$(BUILD)/bench c-tests/bench/insns.sh $(BUILD)/bench/rf_insns

# Instructions of one empty fi_cq_read of an endpoint with 1, 8, 64 and 256
# connected peers (callgrind over rf_idle: rustfab shm, tcp, auto and 1.17's
# shm), so that a progress pass whose cost grows with idle peers shows
# (c-tests/bench/idle.sh; docs/performance-history.md "Scale"; not part of test).
$(BUILD)/bench/rf_idle: c-tests/bench/rf_idle.c c-tests/bench/bench_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

bench-idle: lib $(BUILD)/bench/rf_idle
	c-tests/bench/idle.sh $(BUILD)/bench/rf_idle

# What an endpoint costs per peer (RSS, descriptors, shm mapped, first and
# steady message round) for 1 ... 256 peers, rustfab next to shm and
# tcp;ofi_rxm: the table of docs/performance-history.md "## Scale" (not part of test).
$(BUILD)/scale/rf_scale: c-tests/scale/rf_scale.c c-tests/bench/bench_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

scale: lib $(BUILD)/scale/rf_scale
	c-tests/scale/run.sh $(BUILD)/scale/rf_scale

# ---- Open MPI over rustfab (pml cm, mtl ofi)
$(BUILD)/mpi/mpi_test: c-tests/mpi/mpi_test.c c-tests/mpi/mpi_check.h
	@mkdir -p $(dir $@)
	mpicc -O2 -Wall -o $@ $<

$(BUILD)/mpi/hello: c-tests/mpi/hello.c
	@mkdir -p $(dir $@)
	mpicc -O2 -Wall -o $@ $<

$(BUILD)/mpi/onesided: c-tests/mpi/onesided.c c-tests/mpi/mpi_check.h
	@mkdir -p $(dir $@)
	mpicc -O2 -Wall -Wextra -o $@ $<

# The default entry (auto: shm between the ranks of this host) and tcp;
# then MPI one-sided (osc rdma over btl ofi on rustfab's RMA,
# c-tests/mpi/onesided.sh) on both.
mpi: lib $(BUILD)/mpi/mpi_test $(BUILD)/mpi/onesided
	c-tests/mpi/run.sh $(BUILD)/mpi/mpi_test
	RF_TRANSPORT=tcp c-tests/mpi/run.sh $(BUILD)/mpi/mpi_test
	c-tests/mpi/onesided.sh $(BUILD)/mpi/onesided
	RF_TRANSPORT=tcp c-tests/mpi/onesided.sh $(BUILD)/mpi/onesided

# ---- Open MPI across hosts: network namespaces as hosts (2 x 2 and 4 x 1
# ranks, and the 64-rank job: 4 x 16, oversubscribed), launched through an
# rsh agent; shm within a host, TCP between hosts (c-tests/mpi-hosts/run.sh;
# needs root, prints "SKIP: cannot create network namespaces" and succeeds
# without it).
$(BUILD)/mpi-hosts/pingpong: c-tests/mpi-hosts/pingpong.c
	@mkdir -p $(dir $@)
	mpicc -O2 -Wall -Wextra -o $@ $<

$(BUILD)/mpi-hosts/alltoall: c-tests/mpi-hosts/alltoall.c
	@mkdir -p $(dir $@)
	mpicc -O2 -Wall -Wextra -o $@ $<

mpi-hosts: lib $(BUILD)/mpi/mpi_test $(BUILD)/mpi-hosts/pingpong $(BUILD)/mpi-hosts/alltoall
	$(TIMEOUT) 420 c-tests/mpi-hosts/run.sh $(BUILD)

# MPI_Alltoall for 4-16 ranks on 1, 2 and 4 namespace hosts, rustfab next to
# Open MPI's own shared memory and TCP; then the 64-rank job (4 x 16,
# oversubscribed: MPI_Init, first contact, 8 B and 64 KiB, RSS and
# descriptors per rank), rustfab next to ob1 and pml ucx
# (docs/performance.md; tens of minutes, root).
scale-mpi: lib $(BUILD)/mpi/mpi_test $(BUILD)/mpi-hosts/pingpong $(BUILD)/mpi-hosts/alltoall
	MPI_HOSTS_ONLY=alltoall $(TIMEOUT) 2400 c-tests/mpi-hosts/run.sh $(BUILD)

# ---- libfabric 2.x cores and today's MPI releases: the Open MPI 5 and MPICH 5
# wheels from PyPI (each bundles libfabric 2.5.1) run the MPI test program over
# rustfab, fi_getinfo is checked at API 1.17 ... 2.5 through each core, and
# 2.x's matching and addressing (matching2) over shm, tcp and auto through the
# 2.x cores (and LIBFABRIC2_PREFIX's, when set) (c-tests/libfabric2/run.sh;
# docs/libfabric2.md).
$(BUILD)/libfabric2/getinfo_versions: c-tests/libfabric2/getinfo_versions.c c-tests/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

$(BUILD)/libfabric2/matching2: c-tests/libfabric2/matching2.c c-tests/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

mpi5: lib $(BUILD)/libfabric2/getinfo_versions $(BUILD)/libfabric2/matching2
	@mkdir -p $(BUILD)/mpi5
	c-tests/libfabric2/run.sh $(BUILD)

# ---- the panic boundary, proven with a test build (cargo feature panic-test)
panic-test:
	$(CARGO) build --release --lib --features panic-test --target-dir target/panic
	@mkdir -p $(BUILD)/panic
	cp -f target/panic/release/librustfab.so $(BUILD)/panic/librustfab-fi.so.tmp && mv -f $(BUILD)/panic/librustfab-fi.so.tmp $(BUILD)/panic/librustfab-fi.so
	$(CC) $(CFLAGS) -o $(BUILD)/panic/test_panic c-tests/panic/test_panic.c -lfabric
	FI_PROVIDER_PATH=$(CURDIR)/$(BUILD)/panic FI_PROVIDER=rustfab FI_RUSTFAB_TEST_PANIC=fi_cq_read \
		$(TIMEOUT) 60 $(BUILD)/panic/test_panic
