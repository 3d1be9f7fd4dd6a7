"""CPU time of processes from /proc/*/task/*/schedstat (the first field:
ns on a CPU, exact), for the benchmarks that report CPU per request or per
event (datapath.py, overhead.py).

Not /proc/stat, whose 250 Hz tick falls into step with 1 ms timers and
shows 0-95% busy for the same run (KERNEL-FACTS.md). Kernel threads
(kworkers, ksoftirqd: where redirected bytes are sent and deferred softirq
work runs) are counted with the processes measured. Softirq time is charged
to the task it interrupts, so on a machine shared with other jobs the
figures carry some of their work: run on a quiet machine, take medians.
Only tasks alive at both samples count: a thread that exits in between
takes its time with it."""
import glob


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
