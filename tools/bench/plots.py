"""PNG plots of the benchmark with gnuplot: data files and a script per plot
next to the PNG in the results directory, so a plot can be redrawn."""
import os
import re
import subprocess

import fleet
from runs import LABELS, SCALE

TERM = "set terminal pngcairo size 900,560 noenhanced font ',10'\n"


def _draw(out, name, script):
    path = os.path.join(out, name + ".gp")
    with open(path, "w") as f:
        f.write(TERM + "set output '%s.png'\n" % name + script)
    r = subprocess.run(["gnuplot", name + ".gp"], cwd=out, capture_output=True, text=True)
    if r.returncode != 0:
        print("bench: gnuplot %s: %s" % (path, r.stderr.strip()))


def ttft_cdf(out, key, title, res):
    plot = []
    for s, r in res.items():
        ttft = sorted(int(row["ttft_us"]) * SCALE / 1000.0 for row in fleet.read_csv(r["csv"])
                      if row["ttft_us"] and not row["error"])
        dat = "ttft-%s-%s.dat" % (key, s)
        with open(os.path.join(out, dat), "w") as f:
            for i, v in enumerate(ttft):
                f.write("%.3f %.5f\n" % (v, (i + 1) / len(ttft)))
        plot.append("'%s' using 1:2 with lines lw 2 title '%s'" % (dat, LABELS[s]))
    _draw(out, "ttft-cdf-" + key,
          "set title '%s: TTFT CDF (model time)'\nset logscale x\nset xlabel 'TTFT (ms)'\n"
          "set ylabel 'fraction of requests'\nset grid\nset key bottom right\n"
          "plot %s\n" % (title.replace("'", ""), ", ".join(plot)))


def shares(out, key, title, res):
    dat = "share-%s.dat" % key
    names = list(res)
    n = max(len(r["backends"]) for r in res.values())
    with open(os.path.join(out, dat), "w") as f:
        f.write("rank " + " ".join('"%s"' % LABELS[s] for s in names) + "\n")
        cols = []
        for s in names:
            b = res[s]["backends"]
            tot = float(sum(b.values())) or 1.0
            cols.append(sorted((100.0 * v / tot for v in b.values()), reverse=True))
        for i in range(n):
            f.write("%d %s\n" % (i + 1, " ".join("%.2f" % c[i] if i < len(c) else "0"
                                                 for c in cols)))
    _draw(out, "share-" + key,
          "set title '%s: share of requests per instance (sorted)'\nset style data histogram\n"
          "set style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
          "set ylabel '%% of requests'\nset yrange [0:*]\nset xlabel 'instance (by share)'\n"
          "set grid ytics\nset key outside right\n"
          "plot %s, 12.8 with lines dt 2 lc 'black' title '12.8-15.8%% target', "
          "15.8 with lines dt 2 lc 'black' notitle\n"
          % (title.replace("'", ""),
             ", ".join("'%s' using %d:xtic(1) title columnhead" % (dat, i + 2)
                       for i in range(len(names)))))


def hot_inflight(out, res):
    plot = []
    for name, r in res.items():
        dat = "hot-inflight-%s.dat" % name
        with open(os.path.join(out, dat), "w") as f:
            for t, m in r.get("in_flight_samples", []):
                f.write("%.2f %d\n" % (t * SCALE, max(m.values()) if m else 0))
        plot.append("'%s' using 1:2 with lines lw 2 title '%s'" % (dat, LABELS[name]))
    _draw(out, "hot-inflight",
          "set title 'Hot prefix (50%% of traffic): highest in-flight count of any instance'\n"
          "set xlabel 'time (model s)'\nset ylabel 'requests in flight'\nset grid\n"
          "plot %s\n" % ", ".join(plot))


def scale_series(out, res, t_add, t_del, suffix=""):
    plot = []
    for s, r in res.items():
        dat = "scale%s-%s.dat" % (suffix, s)
        with open(os.path.join(out, dat), "w") as f:
            for t, h in r["series"]:
                f.write("%.1f %.4f\n" % (t, h))
        plot.append("'%s' using 1:2 with linespoints lw 2 pt 7 ps 0.4 title '%s'"
                    % (dat, LABELS[s]))
    _draw(out, "scale-event" + suffix,
          "set title 'KV hit rate per %g model s: 8th instance added, later instance 0 removed'\n"
          "set xlabel 'time (model s)'\nset ylabel 'cached / prompt tokens'\n"
          "set yrange [0:1]\nset grid\nset arrow from %g,0 to %g,1 nohead dt 2\n"
          "set arrow from %g,0 to %g,1 nohead dt 2\nset key bottom right\nplot %s\n"
          % (SCALE, t_add, t_add, t_del, t_del, ", ".join(plot)))


def curves(out, name, title, xlabel, panels, logx=True):
    """Growth curves: one PNG with a panel per (ylabel, {series: [(x, y)]},
    logy) side by side, a line per series; a .dat per series and panel."""
    script = ["set terminal pngcairo size %d,560 noenhanced font ',10'" % (100 + 450 * len(panels)),
              "set multiplot layout 1,%d title '%s'" % (len(panels), title.replace("'", ""))]
    for i, (ylabel, series, logy) in enumerate(panels):
        plot = []
        for s, pts in series.items():
            pts = [(x, y) for x, y in pts if y is not None]
            if not pts:
                continue
            dat = "%s-%d-%s.dat" % (name, i, re.sub(r"[^A-Za-z0-9.-]+", "_", s).strip("_"))
            with open(os.path.join(out, dat), "w") as f:
                for x, y in pts:
                    f.write("%g %g\n" % (x, y))
            plot.append("'%s' using 1:2 with linespoints lw 2 pt 7 title '%s'" % (dat, s))
        script.append("%sset logscale x\n" % ("" if logx else "un") +
                      "%sset logscale y\n" % ("" if logy else "un") +
                      "set xlabel '%s'\nset ylabel '%s'\nset grid\nset key top left\n"
                      "plot %s" % (xlabel, ylabel.replace("'", ""),
                                   ", ".join(plot) or "NaN notitle"))
    _draw(out, name, "\n".join(script) + "\nunset multiplot\n")
