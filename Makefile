# prefixgate — built in the libbpf-bootstrap manner: every generated file
# (objects, BPF objects, *.skel.h, binaries) lives under build/.
#   make            build build/prefixgate and the tools
#   make test       install missing packages, build, run every test
#   make demo       install missing packages, build, run the demo workload
#   make bench      the full benchmark (results under build/bench/)
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
	-Iinclude -Iuser -I$(BUILD) -MMD -MP
LDLIBS  := -lbpf -lelf -lz -luring -lxxhash -lpthread -lm

ifeq ($(V),1)
Q :=
msg =
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

BPF_SRCS  := $(wildcard bpf/*.bpf.c)
SKELS     := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))
LIB_SRCS  := $(filter-out user/main.c,$(wildcard user/*.c))
LIB_OBJS  := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRCS))
LIB       := $(BUILD)/libprefixgate.a
TOOLS     := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard tools/*/*.c)))))
TOOL_BINS := $(addprefix $(BUILD)/,$(TOOLS))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
BPFT_SRCS := $(wildcard tests/bpf/test_*.c)
BPFT_BINS := $(patsubst tests/bpf/%.c,$(BUILD)/tests/%,$(BPFT_SRCS))

.PHONY: all deps test test-unit test-asan test-bpf test-e2e demo bench clean format tests-build
all: deps $(BUILD)/prefixgate $(TOOL_BINS)

deps:
	$(Q)tools/deps.sh

# --- BPF: clang -> strip DWARF with `bpftool gen object` -> skeleton --------
$(BUILD)/%.bpf.o: bpf/%.bpf.c $(wildcard include/*.h bpf/*.h) | $(BUILD)
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
	$(Q)$(CC) $(CFLAGS) $(SANFLAGS) $^ $(LDLIBS) -o $@

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

tests-build: all $(UNIT_BINS) $(BPFT_BINS)

# --- tests -------------------------------------------------------------------
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

test: deps
	$(Q)$(MAKE) --no-print-directory tests-build
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/asan CFLAGS="-O1 -g" \
		SANFLAGS="$(ASAN_FLAGS)" tests-build
	$(Q)BUILD=$(BUILD) tests/run.sh unit asan bpf e2e

test-unit: deps tests-build
	$(Q)BUILD=$(BUILD) tests/run.sh unit

test-asan: deps
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/asan CFLAGS="-O1 -g" \
		SANFLAGS="$(ASAN_FLAGS)" tests-build
	$(Q)BUILD=$(BUILD) tests/run.sh asan e2e-asan

test-bpf: deps tests-build
	$(Q)BUILD=$(BUILD) tests/run.sh bpf

test-e2e: deps tests-build
	$(Q)BUILD=$(BUILD) tests/run.sh e2e

demo: all
	$(Q)python3 tools/bench/demo.py --build $(BUILD)

bench: all
	$(Q)BUILD=$(BUILD) tools/bench.sh

format:
	$(Q)clang-format -i $(wildcard user/*.[ch] include/*.h bpf/*.c tools/*/*.[ch] tests/*/*.c)

clean:
	$(Q)rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
