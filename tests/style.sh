#!/bin/sh
# Style checks of the C sources, as TAP ("ok N - ...", "not ok N - ..."),
# then one line "style: N passed, N failed" (tests/run.sh style counts the
# TAP lines). Part of `make test`: it reports, nothing is rewritten (`make
# format` rewrites).
#
#   format   clang-format --dry-run -Werror with the committed .clang-format:
#            one test per file, failing when clang-format would change it.
#            clang-format first runs on batches of FORMAT_BATCH files (40),
#            two batches at a time (one process per file took ~50 s of the
#            ~60 s); a file passes only if its whole batch exited 0, and the
#            files of any other batch are checked again one by one, so the
#            failing ones are named and nothing passes unchecked.
#   size     at most MAX_LINES lines per .c / .h file, one test per file.
#   includes no include circle of more than two units in user/ (a unit is
#            DIR/foo: foo.c + foo.h), tools/includes.py; one test, naming
#            the members of each circle when it fails. Not run when files
#            are given as arguments.
#
# Files: every .c and .h under user/ include/ bpf/ tools/ tests/ (build
# output and fuzz corpora excluded), or the files given as arguments.
# usage: tests/style.sh [FILE...]    (run from the repository root)
#        CLANG_FORMAT=clang-format-14 tests/style.sh
#
# MAX_LINES is 600 because STYLE.md asks that a reader find any behaviour by
# its file name and puts the ceiling at about 600 lines. In this tree that is
# also where the well-split modules end (http.c, key.c, admin.c are 540-590
# lines, each one concern) and where the files that the layout issue names as
# mixing concerns begin (worker.c: the loop and the sockets; splice.c: the
# loader and the per-connection calls). Test files are held to it too: a
# test file that long tests more than one module.
set -u
MAX_LINES=${MAX_LINES:-600}
CF=${CLANG_FORMAT:-clang-format}

cd "$(dirname "$0")/.." || exit 2
if [ $# -gt 0 ]; then
	files=$*
else
	files=$(find user include bpf tools tests -name '*.[ch]' \
		-not -path '*/corpus/*' -not -path 'build/*' | LC_ALL=C sort)
fi

if ! command -v "$CF" >/dev/null 2>&1; then
	# clang-format ships in its own Debian package (not with clang)
	tools/deps.sh clang-format >/dev/null 2>&1 || true
fi
have_cf=1
command -v "$CF" >/dev/null 2>&1 || have_cf=0
[ -f .clang-format ] || { echo "style: no .clang-format at the repository root" >&2; exit 2; }

n=0 pass=0 fail=0
ok() { n=$((n + 1)); pass=$((pass + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $1"; }

nl='
'
# the files of every batch clang-format did not pass: checked one by one below
suspect=
if [ "$have_cf" = 1 ]; then
	suspect=$(printf '%s\n' $files | xargs -n "${FORMAT_BATCH:-40}" -P 2 sh -c \
		'"$0" --dry-run -Werror --style=file "$@" >/dev/null 2>&1 || printf "%s\n" "$@"' "$CF")
fi
for f in $files; do
	if [ "$have_cf" = 0 ]; then
		n=$((n + 1))
		echo "ok $n - format $f # SKIP $CF not installed (tools/deps.sh clang-format, as root)"
		continue
	fi
	case "$nl$suspect$nl" in
	*"$nl$f$nl"*) ;;
	*) ok "format $f"; continue ;;
	esac
	if out=$("$CF" --dry-run -Werror --style=file "$f" 2>&1); then
		ok "format $f"
	else
		notok "format $f"
		# the first place clang-format would change, as a hint
		echo "$out" | grep -m1 -E 'error:' | sed 's/^/# /'
	fi
done

# one wc for every file: "LINES FILE" per line in the order given, then a
# total; a file it could not read has no line, and fails
exec 3<<EOF
$(wc -l $files 2>/dev/null)
EOF
got= lines=
for f in $files; do
	[ -n "$got" ] || read -r lines got <&3 || got=
	if [ "$got" != "$f" ]; then
		notok "size $f (not readable)"
		continue
	fi
	got=
	if [ "$lines" -le "$MAX_LINES" ]; then
		ok "size $f ($lines lines)"
	else
		notok "size $f ($lines lines, over $MAX_LINES)"
	fi
done
exec 3<&-

if [ $# -eq 0 ]; then
	if out=$(python3 tools/includes.py 2>&1); then
		ok "includes user/ (no circle of more than two units)"
	else
		notok "includes user/ (no circle of more than two units)"
		echo "$out" | sed 's/^/# /'
	fi
fi

echo "1..$n"
echo "style: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
