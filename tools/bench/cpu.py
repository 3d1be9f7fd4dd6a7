"""CPU time of processes from /proc/*/task/*/schedstat (the first field:
ns on a CPU, exact), for the benchmarks that report CPU per request or per
event (datapath.py, overhead.py).

Not /proc/stat, whose 250 Hz tick falls into step with 1 ms timers and
shows 0-95% busy for the same run. Kernel threads
(kworkers, ksoftirqd: where redirected bytes are sent and deferred softirq
work runs) are counted with the processes measured. Softirq time is charged
to the task it interrupts, so on a machine shared with other jobs the
figures carry some of their work: run on a quiet machine, take medians.
Only tasks alive at both samples count: a thread that exits in between
takes its time with it.

Counts (PerfStat): instructions retired (user and kernel) and a few
software events, from perf stat -p over a window. A count, unlike a time,
barely moves when other jobs share the CPUs, so it tells two builds apart
on a busy machine. Only the given processes' own tasks are counted (no
kernel threads), and instructions need a hardware PMU, which many VMs do
not expose: what cannot be counted is None, with the reason."""
import glob
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time


def ppid(pid):
    """Parent pid of pid, -1 if it is gone."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def is_kthread(pid):
    """kthreadd (pid 2) and its children: every kernel thread."""
    return int(pid) == 2 or ppid(pid) == 2


def _pids():
    for d in glob.glob("/proc/[0-9]*"):
        yield int(d.rsplit("/", 1)[1]), d


def _process_ns(d):
    """ns on a CPU of every task (thread) of the process at /proc/PID."""
    total = 0
    for f in glob.glob(d + "/task/[0-9]*/schedstat"):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def tasks_ns(pids):
    """CPU time, ns, of every task of the processes pids (no kernel threads)."""
    return sum(_process_ns("/proc/%d" % pid) for pid in pids)


def cpu_ns(pids=None):
    """CPU time, ns, of every task of the given processes plus every kernel
    thread; of every task on the machine when pids is None."""
    return sum(_process_ns(d) for pid, d in _pids()
               if pids is None or pid in pids or is_kthread(pid))


def cpu_ns_by_role(roles, others=False):
    """cpu_ns split: {role: ns} for roles = {pid: role}, plus "kernel" for
    every kernel thread, and with others "other" for every other process
    (work on the machine that is not the one measured)."""
    out = dict.fromkeys(list(roles.values()) + ["kernel"] + (["other"] if others else []), 0)
    for pid, d in _pids():
        role = roles.get(pid)
        if role is None:
            role = "kernel" if is_kthread(pid) else "other" if others else None
            if role is None:
                continue
        out[role] += _process_ns(d)
    return out


def tree(pids):
    """pids and every descendant of them alive now (nginx's workers are
    children of its master)."""
    children = {}
    for pid, _ in _pids():
        children.setdefault(ppid(pid), []).append(pid)
    out, todo = set(), list(pids)
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += children.get(p, [])
    return out


PERF = "/usr/bin/perf"
INSTRUCTIONS = ("instructions:u", "instructions:k")
# io_uring submissions and sleeps: counted by the kernel itself (a
# tracepoint, a software event), so a machine without a PMU has them.
# Not raw_syscalls:sys_enter: while it is on, every syscall on the machine
# takes the slow path (~180 ns more each, measured here), which would
# charge a proxy's CPU per request, measured in the same window, by how
# many syscalls it makes.
SOFT_EVENTS = ("io_uring:io_uring_submit_req", "context-switches")
PERF_EVENTS = INSTRUCTIONS + SOFT_EVENTS
_probed = {}


def _perf_parse(path):
    """{event: count, or None when perf says <not supported>} from perf stat
    -x, output; an event enabled but never run (<not counted>) is 0. perf
    names an event it could only count in user space EVENT:u (not root, with
    kernel.perf_event_paranoid 2): that one is under EVENT, as counted."""
    out = {}
    with open(path) as f:
        for line in f:
            v = line.strip().split(",")
            if len(v) < 3 or line.startswith("#"):
                continue
            if v[0] == "<not supported>":
                out[v[2]] = None
            elif v[0] == "<not counted>":
                out[v[2]] = 0
            else:
                try:
                    out[v[2]] = int(float(v[0]))
                except ValueError:
                    pass
    for e in list(out):
        if e.endswith(":u") and e[:-2] not in out and e[:-2] not in INSTRUCTIONS:
            out[e[:-2]] = out[e]
    return out


def perf_events(events=PERF_EVENTS):
    """({event: None}, {event: why}): which of events perf can count here,
    each tried once on /bin/true, and why not for the others (perf missing,
    not allowed by kernel.perf_event_paranoid or tracefs permissions, no
    such counter: no PMU)."""
    ok, why = {}, {}
    for e in events:
        if e not in _probed:
            _probed[e] = _probe(e)
        if _probed[e] is None:
            ok[e] = None
        else:
            why[e] = _probed[e]
    return ok, why


def _probe(event):
    """None if perf can count event, else why not."""
    if not os.access(PERF, os.X_OK):
        return "%s not found" % PERF
    fd, out = tempfile.mkstemp(prefix="perf-probe-")
    os.close(fd)
    try:
        p = subprocess.run([PERF, "stat", "-x,", "-o", out, "-e", event, "--",
                            shutil.which("true") or "/bin/true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=30)
        counts = _perf_parse(out) if p.returncode == 0 else {}
        err = " ".join(" ".join(p.stderr.split("\n")[:2]).split()) or "exit %d" % p.returncode
    except (OSError, subprocess.TimeoutExpired) as e:
        counts, err = {}, str(e)
    finally:
        os.unlink(out)
    if counts.get(event) is not None:
        return None
    if event in counts:
        return "perf: <not supported> (no hardware counter: no PMU, as in many VMs)"
    return "perf stat failed: %s (kernel.perf_event_paranoid is %s)" % (err, _paranoid())


def _paranoid():
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


class PerfStat:
    """perf stat -p over a window: start() counts every task of pids from
    then on (perf attaches first, its events disabled, and is enabled through
    its control fifo: the window does not include its start-up), stop()
    returns {event: count, None if it was not counted}. Events perf cannot
    count here (perf_events) are left out of the run; if perf cannot attach
    to pids, nothing is counted. why: {event: why it was not counted}."""

    def __init__(self, pids, events=PERF_EVENTS):
        self.events = list(events)
        self.ok, self.why = perf_events(events)
        self.pids = sorted(pids)
        self.proc = None

    def start(self):
        if not self.ok or not self.pids:
            return self
        self.dir = tempfile.mkdtemp(prefix="perf-")
        ctl, ack = os.path.join(self.dir, "ctl"), os.path.join(self.dir, "ack")
        os.mkfifo(ctl)
        os.mkfifo(ack)
        self.out = os.path.join(self.dir, "out")
        # Read-write opens of a fifo do not wait for the other end.
        self.ctl, self.ack = os.open(ctl, os.O_RDWR), os.open(ack, os.O_RDWR)
        with open(os.path.join(self.dir, "err"), "w") as err:
            self.proc = subprocess.Popen(
                [PERF, "stat", "-x,", "-o", self.out, "--control", "fifo:%s,%s" % (ctl, ack),
                 "-D", "-1", "-e", ",".join(self.ok), "-p", ",".join(map(str, self.pids))],
                stdout=subprocess.DEVNULL, stderr=err)
        if not self._command("enable"):
            with open(os.path.join(self.dir, "err")) as f:
                msg = ([ln.strip() for ln in f if ln.strip()] or
                       ["no answer on its control fifo"])[0]
            self._end()
            why = "perf stat -p could not attach: %s (kernel.perf_event_paranoid is %s)" % (
                msg, _paranoid())
            self.why.update(dict.fromkeys(self.ok, why))
            self.ok = {}
        return self

    def _command(self, cmd, timeout=10.0):
        """True once perf acknowledged cmd; False if it ended or did not answer."""
        os.write(self.ctl, (cmd + "\n").encode())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if select.select([self.ack], [], [], 0.1)[0]:
                os.read(self.ack, 64)
                return True
            if self.proc.poll() is not None:
                return False
        return False

    def _end(self):
        """Ends perf (it writes its counts on SIGINT); the counts read."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.ctl)
        os.close(self.ack)
        counts = _perf_parse(self.out) if os.path.exists(self.out) else {}
        shutil.rmtree(self.dir, ignore_errors=True)
        self.proc = None
        return counts

    def stop(self):
        out = dict.fromkeys(self.events)
        if self.proc is None:
            return out
        self._command("disable")
        counts = self._end()
        out.update({e: counts.get(e) for e in self.ok})
        return out
