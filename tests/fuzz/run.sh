#!/bin/sh
# Run libFuzzer targets for a bounded time each and report as TAP:
#   ok N - fuzz_NAME (E execs)        not ok N - fuzz_NAME (why)
# then "# fuzz: E execs in all, S s". usage: tests/fuzz/run.sh SECONDS NAME...
# (from the top of the repository). BUILD (default build): the binaries are
# $BUILD/fuzz/fuzz_NAME (make fuzz-build). Each run starts from the
# committed seeds tests/fuzz/corpus/NAME/ plus $BUILD/fuzz/corpus-NAME/,
# where the inputs it finds are kept; a failing input is saved as
# $BUILD/fuzz/NAME-{crash,leak,timeout,oom}-SHA1 and the output goes to
# $BUILD/fuzz/NAME.log.
set -u
BUILD=${BUILD:-build}
secs=$1
shift
dir=$BUILD/fuzz
n=0 total=0 failed=0 start=$(date +%s)
echo "1..$#"
for name in "$@"; do
	n=$((n + 1))
	bin=$dir/fuzz_$name
	log=$dir/$name.log
	if [ ! -x "$bin" ]; then
		echo "not ok $n - fuzz_$name (not built: make fuzz-build)"
		failed=1
		continue
	fi
	mkdir -p "$dir/corpus-$name"
	# -timeout: one input taking 10 s is a hang; stdin closed so nothing
	# the target opens can wait on the terminal.
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$dir/$name-" "$dir/corpus-$name" "tests/fuzz/corpus/$name" \
		</dev/null >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	execs=${execs:-0}
	total=$((total + execs))
	if [ "$rc" -eq 0 ]; then
		echo "ok $n - fuzz_$name ($execs execs)"
	else
		echo "not ok $n - fuzz_$name (exit $rc after $execs execs, log $log)"
		grep -E 'invariant failed|ERROR:|SUMMARY:|Test unit written|^MS:' "$log" |
			head -n 8 | sed 's/^/# /'
		failed=1
	fi
done
echo "# fuzz: $total execs in all, $(($(date +%s) - start)) s"
exit "$failed"
