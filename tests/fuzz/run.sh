#!/bin/sh
# Run libFuzzer targets for a bounded time each and report as TAP:
#   ok N - fuzz_NAME (E execs)        not ok N - fuzz_NAME (why)
# then "# fuzz: E execs in all, S s". usage: tests/fuzz/run.sh SECONDS NAME...
# (from the top of the repository). BUILD (default build): the binaries are
# $BUILD/fuzz/fuzz_NAME (make fuzz-build). FUZZ_JOBS (default 2) targets run
# at a time, each a process on one core; the report keeps the given order. Each run starts from the
# committed seeds tests/fuzz/corpus/NAME/ plus $BUILD/fuzz/corpus-NAME/,
# where the inputs it finds are kept; a failing input is saved as
# $BUILD/fuzz/NAME-{crash,leak,timeout,oom}-SHA1 and the output goes to
# $BUILD/fuzz/NAME.log.
set -u
BUILD=${BUILD:-build}
JOBS=${FUZZ_JOBS:-2}
secs=$1
shift
dir=$BUILD/fuzz
n=0 total=0 failed=0 start=$(date +%s)

fuzz_one() { # name: run it, its exit status to $dir/$name.rc
	name=$1 bin=$dir/fuzz_$1 log=$dir/$1.log
	mkdir -p "$dir/corpus-$name"
	# -timeout: one input taking 10 s is a hang; stdin closed so nothing
	# the target opens can wait on the terminal.
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$dir/$name-" "$dir/corpus-$name" "tests/fuzz/corpus/$name" \
		</dev/null >"$log" 2>&1
	echo $? >"$dir/$name.rc"
}

report() { # name: its TAP line, from $dir/$name.rc and its log
	name=$1 bin=$dir/fuzz_$1 log=$dir/$1.log
	n=$((n + 1))
	if [ ! -x "$bin" ]; then
		echo "not ok $n - fuzz_$name (not built: make fuzz-build)"
		failed=1
		return
	fi
	rc=$(cat "$dir/$name.rc" 2>/dev/null)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	execs=${execs:-0}
	total=$((total + execs))
	if [ "${rc:-x}" = 0 ]; then
		echo "ok $n - fuzz_$name ($execs execs)"
	else
		echo "not ok $n - fuzz_$name (exit ${rc:-unknown} after $execs execs, log $log)"
		grep -E 'invariant failed|ERROR:|SUMMARY:|Test unit written|^MS:' "$log" |
			head -n 8 | sed 's/^/# /'
		failed=1
	fi
}

# JOBS targets at a time (each one process, one core), reported in order
echo "1..$#"
batch=
for name in "$@" ""; do
	if [ -n "$name" ]; then
		rm -f "$dir/$name.rc"
		[ -x "$dir/fuzz_$name" ] && fuzz_one "$name" &
		batch="$batch $name"
		set -- $batch
		[ $# -lt "$JOBS" ] && continue
	fi
	wait
	for b in $batch; do report "$b"; done
	batch=
done
echo "# fuzz: $total execs in all, $(($(date +%s) - start)) s"
exit "$failed"
