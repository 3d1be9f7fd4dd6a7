#!/usr/bin/env python3
"""make bench's figures kept in files: doc/results/PART.txt.

Each file is one part's summary as the benchmark printed it, under a header
that says how it was made (the command, the date, the machine, the commit),
so a figure quoted in the manual can be traced to a run and reproduced.
Raw results (CSV, JSON, plots, logs) stay under build/bench/; these files
are the small part worth keeping in the repository. bench.py writes its
parts through publish(); the other scripts make bench runs go through this
file as a wrapper:

  tools/bench/results.py [--dir DIR] PART -- COMMAND [ARG]...

runs COMMAND, passes its output through, and writes what it printed (less
progress lines and raw JSON records) to DIR/PART.txt (default doc/results);
the exit status is COMMAND's. A failed COMMAND leaves the file as it was.
"""
import os
import shlex
import subprocess
import sys
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_DIR = os.path.join(REPO, "doc", "results")


def commit():
    r = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def publish(directory, part, text, command):
    """Write DIR/PART.txt: a header saying how it was made, then text."""
    os.makedirs(directory, exist_ok=True)
    head = ["# make bench, part %s" % part,
            "# command: %s" % command,
            "# run: %s on %s (%d CPUs), commit %s" % (
                time.strftime("%Y-%m-%d %H:%M"), os.uname().nodename, os.cpu_count(), commit())]
    path = os.path.join(directory, "%s.txt" % part)
    with open(path, "w") as f:
        f.write("\n".join(head) + "\n\n" + text.strip("\n") + "\n")
    return path


def summary(lines):
    """What a script printed, less what only showed progress: lines ending
    in "...", and raw JSON records (they are in its own output files)."""
    return [l for l in lines if not l.rstrip().endswith("...") and not l.startswith("{")]


def main(argv):
    directory = DEFAULT_DIR
    if argv[:1] == ["--dir"]:
        directory, argv = argv[1], argv[2:]
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__.strip().split("\n\n")[2], file=sys.stderr)
        return 2
    part, cmd = argv[0], argv[2:]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
    lines = []
    for line in p.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line.rstrip("\n"))
    rc = p.wait()
    if rc == 0:
        path = publish(directory, part, "\n".join(summary(lines)), " ".join(
            shlex.quote(a) for a in cmd))
        print("summary: %s" % os.path.relpath(path, os.getcwd()))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
