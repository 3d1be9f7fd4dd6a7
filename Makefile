# prefixgate — built in the libbpf-bootstrap manner: every generated file
# (objects, BPF objects, *.skel.h, binaries) lives under build/.
#   make            build build/prefixgate and the tools
#   make test       install missing packages, build, run every test
#   make demo       install missing packages, build, run the demo workload
#   make bench      the full benchmark (raw results under build/bench/, summaries in doc/results/)
#   V=1             show every command
.DELETE_ON_ERROR:
.DEFAULT_GOAL := all
.SECONDARY:

BUILD   ?= build
CC      ?= gcc
CLANG   ?= clang
BPFTOOL ?= bpftool
CFLAGS  ?= -O2 -g
SANFLAGS ?=
ARCH_INC := /usr/include/$(shell $(CC) -dumpmachine)

WARN    := -Wall -Wextra -Werror
ALL_CFLAGS := $(CFLAGS) $(SANFLAGS) $(WARN) -std=gnu11 -D_GNU_SOURCE \
	-Iinclude -Iuser -I$(BUILD) -MMD -MP $(shell pkg-config --cflags libnats 2>/dev/null)
LDLIBS  := -lbpf -lelf -lz -luring -lxxhash -lssl -lcrypto -lpthread -lm \
	$(shell pkg-config --libs libnats 2>/dev/null || echo -lnats) \
	$(shell pkg-config --libs libcares 2>/dev/null || echo -lcares)

ifeq ($(V),1)
Q :=
msg =
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

BPF_SRCS  := $(wildcard bpf/*.bpf.c)
SKELS     := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))
LIB_SRCS  := $(filter-out user/main.c,$(wildcard user/*.c user/*/*.c))
LIB_OBJS  := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRCS))
LIB       := $(BUILD)/libprefixgate.a
TOOLS     := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard tools/*/*.c)))))
TOOL_BINS := $(addprefix $(BUILD)/,$(TOOLS))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
BPFT_SRCS := $(wildcard tests/bpf/test_*.c)
BPFT_BINS := $(patsubst tests/bpf/%.c,$(BUILD)/tests/%,$(BPFT_SRCS))

.PHONY: all deps test test-unit test-asan test-bpf test-e2e demo bench doc-flags soak clean format tests-build \
	tests-asan-build llamaserve
all: deps $(BUILD)/prefixgate $(TOOL_BINS) llamaserve

deps:
	$(Q)tools/deps.sh

# --- BPF: clang -> strip DWARF with `bpftool gen object` -> skeleton --------
# Every object waits for deps (the C objects through the skeletons): with -j,
# nothing is compiled before the packages it needs are installed.
$(BUILD)/%.bpf.o: bpf/%.bpf.c $(wildcard include/*.h bpf/*.h) | $(BUILD) deps
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_x86 -Iinclude -Ibpf \
		-I$(ARCH_INC) $(WARN) -c $< -o $(@:.o=.tmp.o)
	$(Q)$(BPFTOOL) gen object $@ $(@:.o=.tmp.o)
	$(Q)rm -f $(@:.o=.tmp.o)

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf > $@

# --- userspace ---------------------------------------------------------------
$(BUILD)/%.o: %.c | $(SKELS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/prefixgate: $(BUILD)/user/main.o $(LIB)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(SANFLAGS) $^ $(LDLIBS) -o $@

# Each directory tools/NAME/ is one program, build/NAME.
tool_objs = $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/$(1)/*.c))
.SECONDEXPANSION:
$(TOOL_BINS): $(BUILD)/%: $$(call tool_objs,$$*) $(LIB)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(SANFLAGS) $(filter-out $(LIB),$^) $(LIB) $(LDLIBS) -o $@

# tracesim replays a trace over mockllm's timing model, read as pgload reads
# it: it links those tools' pure modules (the libraries the unit tests link).
$(BUILD)/tracesim: $(BUILD)/libtool-mockllm.a $(BUILD)/libtool-pgload.a

# Unit tests of a tool's pure modules, tests/unit/test_<tool>_*.c, also link
# that tool's objects (less its main).
tool_lib_objs = $(filter-out %/main.o,$(call tool_objs,$(1)))
TOOL_TESTS := $(foreach t,$(TOOLS),$(patsubst tests/unit/%.c,$(BUILD)/tests/%,\
	$(wildcard tests/unit/test_$(t)_*.c)))
$(BUILD)/libtool-%.a: $$(call tool_lib_objs,$$*)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(TOOL_TESTS): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o \
		$(BUILD)/libtool-$$(word 2,$$(subst _, ,$$*)).a $(LIB)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(SANFLAGS) $^ -lcmocka $(LDLIBS) -o $@

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(LIB)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(SANFLAGS) $^ -lcmocka $(LDLIBS) -o $@

$(BPFT_BINS): $(BUILD)/tests/%: $(BUILD)/tests/bpf/%.o $(LIB)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(SANFLAGS) $^ $(LDLIBS) -o $@

$(BUILD):
	$(Q)mkdir -p $@

# --- llamaserve: a real engine (llama.cpp through npm's node-llama-cpp) -------
# Its npm packages at pinned versions and the models it serves, generated,
# under $(LLAMA); the plain build's only (nothing in it is compiled: the
# ASan build's make, tests-asan-build, does not make it).
LLAMA      ?= $(BUILD)/llamaserve
LLAMA_NPM  := tools/llamaserve/package.json tools/llamaserve/package-lock.json
llamaserve: $(LLAMA)/node_modules/.package-lock.json $(LLAMA)/tiny.gguf $(LLAMA)/small.gguf \
	$(LLAMA)/large.gguf

$(LLAMA)/node_modules/.package-lock.json: $(LLAMA_NPM) tools/llamaserve/install.sh | deps
	$(Q)tools/llamaserve/install.sh $(LLAMA)

$(LLAMA)/%.gguf: tools/llamaserve/genmodel.py
	$(call msg,GEN,$@)
	$(Q)python3 tools/llamaserve/genmodel.py --size $* --out $@ >/dev/null

tests-build: all $(UNIT_BINS) $(BPFT_BINS)

# The ASan+UBSan build (BUILD=build/asan) makes what runs from it: the unit
# tests and the programs e2e-asan starts from it (the gateway; floorproxy,
# mockllm and prefixgatectl for test_floor.py, test_mockllm_pd.py and
# test_flow.py). The other tools and the BPF selftests run from the plain
# build (tests/run.sh), so compiling them again here would be waste.
ASAN_TOOLS := floorproxy mockllm prefixgatectl
tests-asan-build: deps $(BUILD)/prefixgate $(addprefix $(BUILD)/,$(ASAN_TOOLS)) $(UNIT_BINS)

# --- tests -------------------------------------------------------------------
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# `make test` builds its three variants one after the other (the fuzz build
# uses the plain build's skeletons), each with TEST_JOBS jobs (the cores)
# unless make was given -j; e2e-bpf and e2e-asan share the end-to-end runs
# (tests/run.sh: BPF modes on the plain build, --no-bpf on the ASan build).
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_J = $(if $(findstring --jobserver,$(MAKEFLAGS)),,-j$(TEST_JOBS))
test: deps
	$(Q)$(MAKE) --no-print-directory $(TEST_J) tests-build
	$(Q)$(MAKE) --no-print-directory $(TEST_J) BUILD=$(BUILD)/asan CFLAGS="-O1 -g" \
		SANFLAGS="$(ASAN_FLAGS)" tests-asan-build
	$(Q)$(MAKE) --no-print-directory $(TEST_J) fuzz-build
	$(Q)BUILD=$(BUILD) tests/run.sh unit asan bpf e2e-bpf e2e-asan fuzz style

test-unit: deps tests-build
	$(Q)BUILD=$(BUILD) tests/run.sh unit

test-asan: deps tests-build
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/asan CFLAGS="-O1 -g" \
		SANFLAGS="$(ASAN_FLAGS)" tests-asan-build
	$(Q)BUILD=$(BUILD) tests/run.sh asan e2e-asan

test-bpf: deps tests-build
	$(Q)BUILD=$(BUILD) tests/run.sh bpf

test-e2e: deps tests-build
	$(Q)BUILD=$(BUILD) tests/run.sh e2e

demo: all
	$(Q)python3 tools/bench/demo.py --build $(BUILD)

# Raw results under $(BUILD)/bench/; each part's summary, with the command
# that made it, in $(RESULTS)/PART.txt (doc/benchmarks.md lists them).
RESULTS ?= doc/results
KEEP    := python3 tools/bench/results.py --dir $(RESULTS)
bench: all
	$(Q)tools/deps.sh haproxy nginx-light gnuplot-nox valgrind linux-perf wrk testssl.sh
	$(Q)python3 tools/bench/bench.py --build $(BUILD) --results $(RESULTS)
	$(Q)$(KEEP) instr -- python3 tools/bench/instr.py --build $(BUILD) --out $(BUILD)/bench
	$(Q)$(KEEP) profile -- python3 tools/bench/profile.py --build $(BUILD) --out $(BUILD)/bench
	$(Q)$(KEEP) profile-vs-floor -- python3 tools/bench/profile.py --build $(BUILD) --out $(BUILD)/bench --vs-floor
	$(Q)$(KEEP) datapath -- python3 tools/bench/datapath.py --build $(BUILD) --out $(BUILD)/bench
	$(Q)$(KEEP) slowloris -- python3 tools/bench/slowloris.py --build $(BUILD) --out $(BUILD)/bench
	$(Q)$(KEEP) growth -- python3 tools/bench/growth.py --build $(BUILD) --out $(BUILD)/bench
	$(Q)$(KEEP) tls -- python3 tools/bench/tls.py --build $(BUILD) --out $(BUILD)/bench

# doc/configuration.md's flag list, rewritten from the binary's --help
doc-flags: all
	$(Q)python3 tools/docs/flags.py --build $(BUILD)

# Mixed traffic with chaos for SOAK_SECONDS (default 600), every response checked.
SOAK_SECONDS ?= 600
soak: all
	$(Q)python3 tools/bench/soak.py --build $(BUILD) --duration $(SOAK_SECONDS)

format:
	$(Q)clang-format -i $(wildcard user/*.[ch] user/*/*.[ch] include/*.h bpf/*.[ch] tools/*/*.[ch] tests/*/*.[ch])

clean:
	$(Q)rm -rf $(BUILD)

# --- fuzzing (libFuzzer: clang, libclang-rt-14-dev) ---------------------------
#   make fuzz        run each tests/fuzz/fuzz_NAME.c for FUZZ_SECONDS (default
#                    120) from its seeds tests/fuzz/corpus/NAME/; new inputs go
#                    to $(BUILD)/fuzz/corpus-NAME/, crashes to
#                    $(BUILD)/fuzz/NAME-crash-*; prints executions per target
#                    and in all
#   make fuzz-smoke  the same for FUZZ_SMOKE_SECONDS (default 6) each, as TAP
#                    (tests/run.sh fuzz counts it)
# Each target links the user/*.c it needs, compiled with coverage
# instrumentation and ASan+UBSan: FUZZ_MODS_<name> lists modules, a module
# m being user/m.c or user/DIR/m.c and any user/DIR/m_*.c (so splitting a module in two needs
# no change here). A target missing a module fails to link: add it.
FUZZ_DIR           := $(BUILD)/fuzz
FUZZ_SECONDS       ?= 120
FUZZ_SMOKE_SECONDS ?= 6
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(WARN) -std=gnu11 \
	-D_GNU_SOURCE -Iinclude -Iuser -I$(BUILD) -MMD -MP
FUZZ_NAMES  := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS   := $(addprefix $(FUZZ_DIR)/fuzz_,$(FUZZ_NAMES))
FUZZ_MODS_http   := http forward buf
FUZZ_MODS_json   := json
FUZZ_MODS_usage  := usage json
FUZZ_MODS_trace  := trace otlp json buf names
FUZZ_MODS_jsonedit := jsonedit json buf
FUZZ_MODS_key    := key json buf
FUZZ_MODS_config := config routing_config otlp trace json view strategy random least prefix cache index work names addr modelpool conf buf flow lib/pd \
	jsonedit lib/tls_pem lib/quota
FUZZ_MODS_conf   := conf config routing_config otlp trace json view strategy random least prefix cache index work names addr modelpool buf flow lib/pd \
	jsonedit lib/tls_pem lib/quota
FUZZ_MODS_admin  := admin buf otel otlp trace account lib/quota quotas control members health config routing_config json key http names \
	addr addrset backend_names resolve \
	metrics route routestats scrape accesslog ring view strategy random least prefix maps gateway log index modelpool \
	pools etcd fleet fleetq cache capacity cachecap work load host conf flow flowctl lib/pd \
	jsonedit lib/tls_pem lib/tls_name tls/tls tls/tls_set tls/tls_tickets journal
FUZZ_MODS_tls    := proxy/tls proxy/tls_io sock otlp trace tls/tls tls/tls_set tls/tls_tickets lib/tls_pem \
	lib/tls_name flow log gateway addr config routing_config json view strategy random least \
	prefix cache capacity cachecap index work names modelpool conf buf lib/pd jsonedit lib/quota
fuzz_objs = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,\
	$(sort $(foreach m,$(FUZZ_MODS_$(1)),$(wildcard user/$(m).c user/*/$(m).c user/*/$(m)_*.c))))

.PHONY: fuzz fuzz-smoke fuzz-build

$(FUZZ_DIR)/obj/%.o: %.c | $(SKELS)
	$(call msg,CC-FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_BINS): $(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $$(call fuzz_objs,$$*)
	$(call msg,LINK,$@)
	$(Q)$(CLANG) $(FUZZ_SAN) -fsanitize=fuzzer $^ $(LDLIBS) -o $@

fuzz-build: $(FUZZ_BINS)

fuzz: deps fuzz-build
	$(Q)BUILD=$(BUILD) tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_NAMES)

fuzz-smoke: deps fuzz-build
	$(Q)BUILD=$(BUILD) tests/fuzz/run.sh $(FUZZ_SMOKE_SECONDS) $(FUZZ_NAMES)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# --- install / uninstall (packaging sources: tools/packaging/) ----------------
#   make install    [PREFIX=/usr/local] [DESTDIR=]  prefixgate and prefixgatectl
#                   to $(PREFIX)/sbin, prefixgate.8 and prefixgatectl.8 to
#                   $(PREFIX)/share/man/man8, prefixgate.service to
#                   $(PREFIX)/lib/systemd/system (/lib/systemd/system when
#                   PREFIX=/usr), examples of /etc/prefixgate/prefixgate.conf,
#                   /etc/prefixgate/backends, /etc/prefixgate/routing.json and
#                   /etc/default/prefixgate to
#                   $(PREFIX)/share/doc/prefixgate/examples. Nothing is written
#                   to /etc and no service is enabled or started.
#   make uninstall  remove exactly those files (same PREFIX and DESTDIR).
PREFIX     ?= /usr/local
sbindir    ?= $(PREFIX)/sbin
man8dir    ?= $(PREFIX)/share/man/man8
ifeq ($(PREFIX),/usr)
unitdir    ?= /lib/systemd/system
else
unitdir    ?= $(PREFIX)/lib/systemd/system
endif
exampledir ?= $(PREFIX)/share/doc/prefixgate/examples
INSTALL    ?= install
PKG_DIR      := tools/packaging
PKG_BINS     := prefixgate prefixgatectl
PKG_MANS     := prefixgate.8 prefixgatectl.8
PKG_EXAMPLES := prefixgate.conf backends routing.json prefixgate.default

.PHONY: install uninstall
install: $(addprefix $(BUILD)/,$(PKG_BINS))
	$(call msg,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)$(INSTALL) -d $(DESTDIR)$(sbindir) $(DESTDIR)$(man8dir) $(DESTDIR)$(unitdir) \
		$(DESTDIR)$(exampledir)
	$(Q)$(INSTALL) -m 0755 $^ $(DESTDIR)$(sbindir)/
	$(Q)$(INSTALL) -m 0644 $(addprefix $(PKG_DIR)/,$(PKG_MANS)) $(DESTDIR)$(man8dir)/
	$(Q)sed 's|@SBINDIR@|$(sbindir)|g' $(PKG_DIR)/prefixgate.service \
		> $(DESTDIR)$(unitdir)/prefixgate.service.tmp
	$(Q)chmod 0644 $(DESTDIR)$(unitdir)/prefixgate.service.tmp
	$(Q)mv $(DESTDIR)$(unitdir)/prefixgate.service.tmp $(DESTDIR)$(unitdir)/prefixgate.service
	$(Q)$(INSTALL) -m 0644 $(addprefix $(PKG_DIR)/examples/,$(PKG_EXAMPLES)) \
		$(DESTDIR)$(exampledir)/

uninstall:
	$(call msg,UNINSTALL,$(DESTDIR)$(PREFIX))
	$(Q)rm -f $(addprefix $(DESTDIR)$(sbindir)/,$(PKG_BINS)) \
		$(addprefix $(DESTDIR)$(man8dir)/,$(PKG_MANS)) \
		$(DESTDIR)$(unitdir)/prefixgate.service \
		$(addprefix $(DESTDIR)$(exampledir)/,$(PKG_EXAMPLES))
	$(Q)rmdir $(DESTDIR)$(exampledir) $(DESTDIR)$(PREFIX)/share/doc/prefixgate 2>/dev/null || true
