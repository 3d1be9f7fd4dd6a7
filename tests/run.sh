#!/bin/sh
# Run test suites and print one closing line CI understands:
#   total: N passed, N failed, N skipped
# usage: tests/run.sh [unit] [asan] [bpf] [e2e] [e2e-bpf] [e2e-asan] [fuzz] [style]
# (e2e: every end-to-end suite on the plain build, --no-bpf (shm) and BPF
# modes (E2E_SHM's in shm mode only); e2e-asan: each suite once on the ASan+UBSan build, the shm mode;
# e2e-bpf: the plain build's runs that e2e-asan does not make, the BPF mode
# (e2e.py on the sockmsg and sockmap data paths, not again on auto); `make test` runs e2e-bpf and e2e-asan, so each suite
# with both modes runs in each once, less its shm_only tests in bpf mode
# (see e2e_plain below);
# unit, asan: each unit test program, UNIT_JOBS (the cores) at a time;
# fuzz: each libFuzzer target of $BUILD/fuzz for FUZZ_SMOKE_SECONDS, 6,
# FUZZ_JOBS (2) at a time; style: tests/style.sh, clang-format and file
# size; all of them part of `make test` but e2e)
# Each test program speaks TAP ("ok N - name", "not ok N - name",
# "ok N - name # SKIP why"); cmocka is switched to TAP. A program that exits
# non-zero without reporting a failure, or reports nothing, counts as failed.
# A skip is never counted as a pass.
set -u
BUILD=${BUILD:-build}
LOGS=$BUILD/test-logs
mkdir -p "$LOGS"
pass=0 fail=0 skip=0

# run_tap's two halves: tap_exec runs one program into its log (its exit
# status and seconds beside it, LOG.rc); tap_count reads them and reports.
tap_exec() { # name command...
	log="$LOGS/$1.log"
	shift
	mkdir -p "$(dirname "$log")"
	t0=$(date +%s)
	CMOCKA_MESSAGE_OUTPUT=tap "$@" >"$log" 2>&1
	echo "$? $(($(date +%s) - t0))" >"$log.rc"
}

tap_count() { # name
	name=$1
	log="$LOGS/$name.log"
	rc=1 secs=0
	[ -e "$log.rc" ] && read -r rc secs <"$log.rc"
	rm -f "$log.rc"
	p=$(grep -Ec '^ok [0-9]+' "$log" | tr -d ' ')
	s=$(grep -Ec '^ok [0-9]+.*# *SKIP' "$log" | tr -d ' ')
	f=$(grep -Ec '^not ok [0-9]+' "$log" | tr -d ' ')
	p=$((p - s))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "  $name: exited $rc without reporting a failure"; fi
	if [ $((p + f + s)) -eq 0 ]; then f=1; echo "  $name: reported no test"; fi
	pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
	printf '%-34s %4d passed, %d failed, %d skipped  %4ds\n' "$name" "$p" "$f" "$s" "$secs"
	if [ "$f" -ne 0 ]; then
		grep -E '^not ok|^# ' "$log" | head -40 | sed 's/^/    /'
		echo "    (full log: $log)"
	fi
	grep -E '^ok [0-9]+.*# *SKIP' "$log" | sed 's/^/    /'
}

run_tap() { tap_exec "$@"; tap_count "$1"; }

# tests/run.sh --exec NAME COMMAND...: tap_exec alone, for run_units's
# xargs (not a suite)
if [ "${1:-}" = "--exec" ]; then
	shift
	tap_exec "$@"
	exit 0
fi

# The unit test programs of DIR, UNIT_JOBS (the cores) at a time, as the
# fuzz smoke runs its targets: each is one CPU-bound process alone with its
# fakes (no fixed port, no file another program writes), so two at once
# take about half the time. Reported in order once all have run.
UNIT_JOBS=${UNIT_JOBS:-$(nproc 2>/dev/null || echo 2)}
run_units() { # label dir
	unit_names | xargs -P "$UNIT_JOBS" -I{} "$0" --exec "$1/{}" "$2/{}"
	for t in $(unit_names); do tap_count "$1/$t"; done
}

unit_names() { for f in tests/unit/test_*.c; do basename "$f" .c; done; }
bpf_names() { for f in tests/bpf/test_*.c; do [ -e "$f" ] && basename "$f" .c; done; }

# The end-to-end suites against the plain build, in the modes given:
# "shm bpf" is every run (tests/run.sh e2e); "bpf" is the plain build's share
# of `make test` (e2e-bpf), where e2e-asan runs the --no-bpf (shm) half and
# the suites without a mode, so only the suites e2e-asan does not run are
# left here without a mode (ctl, refrouter, llamaserve).
# name:script of each suite that runs in both modes. Their bpf runs are on
# --data-path auto, where the kernel carries only streamed answers: a test
# none of whose answers streams and that reads no pinned map is checked
# alike in both modes, so the bpf run leaves it out (shm_only in
# tests/e2e/harness.py), and a suite made only of such tests (E2E_SHM)
# runs in shm mode alone.
E2E_BOTH="tls:test_tls ops:test_ops unit:test_unit
	cache:test_cache load:test_load flow:test_flow
	quota:test_quota learn:test_learn otel:test_otel pd:test_pd
	fleet-nats:test_fleet_nats addr:test_addr
	pools:test_pools conf:test_conf real:test_real"
E2E_SHM="boundary:test_boundary metrics:test_metrics ahead:test_parse_ahead"
e2e_plain() { # modes
	E="python3 tests/e2e"
	full=0
	case " $1 " in *" shm "*) full=1 ;; esac
	if [ "$full" = 1 ]; then
		run_tap "e2e/shm" $E/e2e.py --build "$BUILD" --mode shm
		# --data-path auto, which picks sockmsg per streamed response: in
		# e2e-bpf the sockmsg run below and every other suite's bpf run
		# (all on auto) cover it
		run_tap "e2e/bpf" $E/e2e.py --build "$BUILD" --mode bpf
	fi
	run_tap "e2e/sockmsg" $E/e2e.py --build "$BUILD" --mode bpf --data-path sockmsg
	run_tap "e2e/sockmap" $E/e2e.py --build "$BUILD" --mode bpf --data-path sockmap
	if [ "$full" = 1 ]; then # shm only, and e2e-asan runs them
		run_tap "e2e/hostile" $E/test_hostile.py --build "$BUILD" --mode shm
		run_tap "e2e/boundary-tls" $E/test_boundary.py --build "$BUILD" --mode shm --tls
		run_tap "e2e/hostile-tls" $E/test_hostile.py --build "$BUILD" --mode shm --tls
		run_tap "e2e/tls-backends" $E/test_tls_backends.py --build "$BUILD" --mode shm
		run_tap "e2e/replay-shm" $E/test_replay.py --build "$BUILD" --mode shm
		for pair in $E2E_SHM; do
			run_tap "e2e/${pair%%:*}-shm" $E/${pair#*:}.py --build "$BUILD" --mode shm
		done
	fi
	for pair in $E2E_BOTH; do # (not $s: run_tap sets it)
		for m in $1; do
			run_tap "e2e/${pair%%:*}-$m" $E/${pair#*:}.py --build "$BUILD" --mode "$m"
		done
	done
	if [ "$full" = 1 ]; then # no mode, and e2e-asan runs them
		run_tap "e2e/fleet" $E/test_fleet.py --build "$BUILD"
		run_tap "e2e/floor" $E/test_floor.py --build "$BUILD"
		run_tap "e2e/mockllm-pd" $E/test_mockllm_pd.py --build "$BUILD"
	fi
	run_tap "e2e/ctl" $E/test_ctl.py --build "$BUILD"
	run_tap "e2e/refrouter" $E/test_refrouter.py --build "$BUILD"
	run_tap "e2e/llamaserve" $E/test_llamaserve.py --build "$BUILD"
}

for suite in "$@"; do
	case $suite in
	unit) run_units unit "$BUILD/tests" ;;
	asan) ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
		run_units asan "$BUILD/asan/tests" ;;
	bpf) for t in $(bpf_names); do run_tap "bpf/$t" "$BUILD/tests/$t"; done ;;
	e2e) e2e_plain "shm bpf" ;;
	e2e-bpf) e2e_plain bpf ;;
	e2e-asan) export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
		run_tap "e2e-asan/shm" \
		python3 tests/e2e/e2e.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/hostile" \
		python3 tests/e2e/test_hostile.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/replay" \
		python3 tests/e2e/test_replay.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/boundary" \
		python3 tests/e2e/test_boundary.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/boundary-tls" \
		python3 tests/e2e/test_boundary.py --build "$BUILD/asan" --tools "$BUILD" --mode shm --tls
		run_tap "e2e-asan/hostile-tls" \
		python3 tests/e2e/test_hostile.py --build "$BUILD/asan" --tools "$BUILD" --mode shm --tls
		run_tap "e2e-asan/tls" \
		python3 tests/e2e/test_tls.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/tls-backends" \
		python3 tests/e2e/test_tls_backends.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/ops" \
		python3 tests/e2e/test_ops.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/unit" \
		python3 tests/e2e/test_unit.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/cache" \
		python3 tests/e2e/test_cache.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/load" \
		python3 tests/e2e/test_load.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/flow" \
		python3 tests/e2e/test_flow.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/quota" \
		python3 tests/e2e/test_quota.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/learn" \
		python3 tests/e2e/test_learn.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/otel" \
		python3 tests/e2e/test_otel.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/pd" \
		python3 tests/e2e/test_pd.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/ahead" \
		python3 tests/e2e/test_parse_ahead.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/metrics" \
		python3 tests/e2e/test_metrics.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/fleet" \
		python3 tests/e2e/test_fleet.py --build "$BUILD/asan" --tools "$BUILD"
		run_tap "e2e-asan/pools" \
		python3 tests/e2e/test_pools.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/conf" \
		python3 tests/e2e/test_conf.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/fleet-nats" \
		python3 tests/e2e/test_fleet_nats.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/addr" \
		python3 tests/e2e/test_addr.py --build "$BUILD/asan" --tools "$BUILD" --mode shm
		run_tap "e2e-asan/floor" python3 tests/e2e/test_floor.py --build "$BUILD/asan"
		run_tap "e2e-asan/mockllm-pd" \
		python3 tests/e2e/test_mockllm_pd.py --build "$BUILD/asan" --tools "$BUILD/asan"
		run_tap "e2e-asan/real" \
		python3 tests/e2e/test_real.py --build "$BUILD/asan" --tools "$BUILD" --mode shm ;;
	fuzz) run_tap "fuzz/smoke" tests/fuzz/run.sh "${FUZZ_SMOKE_SECONDS:-6}" \
		$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c | sed 's/^fuzz_//'; done) ;;
	style) run_tap "style" tests/style.sh ;;
	*) echo "tests/run.sh: unknown suite $suite" >&2; exit 2 ;;
	esac
done
echo "total: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
