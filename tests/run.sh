#!/bin/sh
# Run test suites and print one closing line CI understands:
#   total: N passed, N failed, N skipped
# usage: tests/run.sh [unit] [asan] [bpf] [e2e] [e2e-asan] [fuzz] [style]
# (fuzz: each libFuzzer target of $BUILD/fuzz for FUZZ_SMOKE_SECONDS, 10;
# style: tests/style.sh, clang-format and file size; part of `make test`)
# Each test program speaks TAP ("ok N - name", "not ok N - name",
# "ok N - name # SKIP why"); cmocka is switched to TAP. A program that exits
# non-zero without reporting a failure, or reports nothing, counts as failed.
# A skip is never counted as a pass.
set -u
BUILD=${BUILD:-build}
LOGS=$BUILD/test-logs
mkdir -p "$LOGS"
pass=0 fail=0 skip=0

run_tap() { # name command...
	name=$1; shift
	log="$LOGS/$name.log"
	mkdir -p "$(dirname "$log")"
	t0=$(date +%s)
	CMOCKA_MESSAGE_OUTPUT=tap "$@" >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - t0))
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

unit_names() { for f in tests/unit/test_*.c; do basename "$f" .c; done; }
bpf_names() { for f in tests/bpf/test_*.c; do [ -e "$f" ] && basename "$f" .c; done; }

for suite in "$@"; do
	case $suite in
	unit) for t in $(unit_names); do run_tap "unit/$t" "$BUILD/tests/$t"; done ;;
	asan) for t in $(unit_names); do
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
			run_tap "asan/$t" "$BUILD/asan/tests/$t"; done ;;
	bpf) for t in $(bpf_names); do run_tap "bpf/$t" "$BUILD/tests/$t"; done ;;
	e2e) E="python3 tests/e2e"
	     run_tap "e2e/shm" $E/e2e.py --build "$BUILD" --mode shm
	     run_tap "e2e/bpf" $E/e2e.py --build "$BUILD" --mode bpf
	     run_tap "e2e/sockmsg" $E/e2e.py --build "$BUILD" --mode bpf --data-path sockmsg
	     run_tap "e2e/sockmap" $E/e2e.py --build "$BUILD" --mode bpf --data-path sockmap
	     run_tap "e2e/hostile" $E/test_hostile.py --build "$BUILD" --mode shm
	     run_tap "e2e/boundary-shm" $E/test_boundary.py --build "$BUILD" --mode shm
	     run_tap "e2e/boundary-tls" $E/test_boundary.py --build "$BUILD" --mode shm --tls
	     run_tap "e2e/hostile-tls" $E/test_hostile.py --build "$BUILD" --mode shm --tls
	     run_tap "e2e/tls-shm" $E/test_tls.py --build "$BUILD" --mode shm
	     run_tap "e2e/tls-bpf" $E/test_tls.py --build "$BUILD" --mode bpf
	     run_tap "e2e/tls-backends" $E/test_tls_backends.py --build "$BUILD" --mode shm
	     run_tap "e2e/boundary-bpf" $E/test_boundary.py --build "$BUILD" --mode bpf
	     run_tap "e2e/ops-shm" $E/test_ops.py --build "$BUILD" --mode shm
	     run_tap "e2e/ops-bpf" $E/test_ops.py --build "$BUILD" --mode bpf
	     run_tap "e2e/unit-shm" $E/test_unit.py --build "$BUILD" --mode shm
	     run_tap "e2e/unit-bpf" $E/test_unit.py --build "$BUILD" --mode bpf
	     run_tap "e2e/metrics-shm" $E/test_metrics.py --build "$BUILD" --mode shm
	     run_tap "e2e/metrics-bpf" $E/test_metrics.py --build "$BUILD" --mode bpf
	     run_tap "e2e/cache-shm" $E/test_cache.py --build "$BUILD" --mode shm
	     run_tap "e2e/cache-bpf" $E/test_cache.py --build "$BUILD" --mode bpf
	     run_tap "e2e/load-shm" $E/test_load.py --build "$BUILD" --mode shm
	     run_tap "e2e/load-bpf" $E/test_load.py --build "$BUILD" --mode bpf
	     run_tap "e2e/flow-shm" $E/test_flow.py --build "$BUILD" --mode shm
	     run_tap "e2e/flow-bpf" $E/test_flow.py --build "$BUILD" --mode bpf
	     run_tap "e2e/quota-shm" $E/test_quota.py --build "$BUILD" --mode shm
	     run_tap "e2e/quota-bpf" $E/test_quota.py --build "$BUILD" --mode bpf
	     run_tap "e2e/learn-shm" $E/test_learn.py --build "$BUILD" --mode shm
	     run_tap "e2e/learn-bpf" $E/test_learn.py --build "$BUILD" --mode bpf
	     run_tap "e2e/replay-shm" $E/test_replay.py --build "$BUILD" --mode shm
	     run_tap "e2e/otel-shm" $E/test_otel.py --build "$BUILD" --mode shm
	     run_tap "e2e/otel-bpf" $E/test_otel.py --build "$BUILD" --mode bpf
	     run_tap "e2e/pd-shm" $E/test_pd.py --build "$BUILD" --mode shm
	     run_tap "e2e/pd-bpf" $E/test_pd.py --build "$BUILD" --mode bpf
	     run_tap "e2e/ahead-shm" $E/test_parse_ahead.py --build "$BUILD" --mode shm
	     run_tap "e2e/ahead-bpf" $E/test_parse_ahead.py --build "$BUILD" --mode bpf
	     run_tap "e2e/fleet-nats-shm" $E/test_fleet_nats.py --build "$BUILD" --mode shm
	     run_tap "e2e/fleet-nats-bpf" $E/test_fleet_nats.py --build "$BUILD" --mode bpf
	     run_tap "e2e/addr-shm" $E/test_addr.py --build "$BUILD" --mode shm
	     run_tap "e2e/addr-bpf" $E/test_addr.py --build "$BUILD" --mode bpf
	     run_tap "e2e/fleet" $E/test_fleet.py --build "$BUILD"
	     run_tap "e2e/pools-shm" $E/test_pools.py --build "$BUILD" --mode shm
	     run_tap "e2e/pools-bpf" $E/test_pools.py --build "$BUILD" --mode bpf
	     run_tap "e2e/conf-shm" $E/test_conf.py --build "$BUILD" --mode shm
	     run_tap "e2e/conf-bpf" $E/test_conf.py --build "$BUILD" --mode bpf
	     run_tap "e2e/ctl" $E/test_ctl.py --build "$BUILD"
	     run_tap "e2e/refrouter" $E/test_refrouter.py --build "$BUILD"
	     run_tap "e2e/floor" $E/test_floor.py --build "$BUILD"
	     run_tap "e2e/mockllm-pd" $E/test_mockllm_pd.py --build "$BUILD"
	     run_tap "e2e/llamaserve" $E/test_llamaserve.py --build "$BUILD"
	     run_tap "e2e/real-shm" $E/test_real.py --build "$BUILD" --mode shm
	     run_tap "e2e/real-bpf" $E/test_real.py --build "$BUILD" --mode bpf ;;
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
	fuzz) run_tap "fuzz/smoke" tests/fuzz/run.sh "${FUZZ_SMOKE_SECONDS:-10}" \
		$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c | sed 's/^fuzz_//'; done) ;;
	style) run_tap "style" tests/style.sh ;;
	*) echo "tests/run.sh: unknown suite $suite" >&2; exit 2 ;;
	esac
done
echo "total: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
