#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""discardcache: the report of tests/bench/pacing.

pacing-report.py RESDIR OUTDIR RUNTIME REPS ELAPSED LOAD

Reads RESDIR/MODEL-CONTENDER-REP.{fio.json,samples,times,flush,stats.json},
writes OUTDIR/benchmarks-pacing.md and OUTDIR/bench-pacing-backlog.png.
"""
import json
import os
import statistics
import subprocess
import sys

MODELS = [
    ("fixed", "fixed cost: one request at a time, every TRIM 20 ms"),
    ("prop", "size proportional: TRIM 1 ms + 4 ms per MiB, device held alone"),
]
CONTENDERS = [
    ("writes-only", "writes alone (baseline)"),
    ("budget", "discardcache budget=2ms"),
    ("btrfs", "btrfs-like: rate=1000 max-discard=64M idle=0"),
    ("f2fs", "f2fs-like: idle=100ms rate=160"),
    ("passthrough", "passthrough=true"),
]
FIXED = ("btrfs", "f2fs")
BUDGET_MS = 2.0
TRIM_RATE = 200 * 64 * 1024          # bytes per second the TRIM job sends
MiB = 1024 * 1024
NOTES = "<!-- notes: kept by pacing-report.py -->"


def load_run(res, model, contender, rep):
    base = os.path.join(res, f"{model}-{contender}-{rep}")
    if not os.path.exists(base + ".fio.json"):
        return None
    with open(base + ".fio.json") as f:
        fio = json.load(f)
    jobs = {j["jobname"]: j for j in fio["jobs"]}
    w = jobs["writes"]["write"]
    t0, t1 = (float(x) for x in open(base + ".times").read().split())
    samples = []
    for line in open(base + ".samples"):
        try:
            d = json.loads(line)
        except ValueError:
            continue                  # the sampler was killed mid-line
        if d.get("s"):
            samples.append((float(d["t"]) - t0, d["s"]))
    during = [(t, s) for t, s in samples if 0 <= t <= t1 - t0]
    r = {
        "p99": w["clat_ns"]["percentile"]["99.000000"] / 1e6,
        "iops": w["iops"],
        "trim_p99": None,
        "flush_s": float(open(base + ".flush").read()),
        "timeline": [(t, s["pending_bytes"] / MiB) for t, s in during],
    }
    if "trims" in jobs:
        r["trim_p99"] = jobs["trims"]["trim"]["clat_ns"]["percentile"]["99.000000"] / 1e6
    if len(during) >= 2:
        (ta, sa), (tb, sb) = during[0], during[-1]
        r["fwd"] = (sb["forwarded_bytes"] - sa["forwarded_bytes"]) / (tb - ta) / MiB
        r["backlog_max"] = max(s["pending_bytes"] for _, s in during) / MiB
        r["backlog_end"] = sb["pending_bytes"] / MiB
        half = [(t, s["pending_bytes"]) for t, s in during if t >= (t1 - t0) / 2]
        r["slope"] = slope(half) / MiB if len(half) >= 3 else 0.0
    else:
        r.update(fwd=0.0, backlog_max=0.0, backlog_end=0.0, slope=0.0)
    with open(base + ".stats.json") as f:
        st = json.load(f)
    r["overruns"] = st.get("budget_overruns", 0)
    r["forced"] = st.get("forced_by_memory", 0)
    r["model_a"] = st.get("model_a_us", 0)
    r["model_b"] = st.get("model_b_us_per_gib", 0)
    return r


def slope(points):
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    sxx = sum((t - mx) ** 2 for t, _ in points)
    return sum((t - mx) * (v - my) for t, v in points) / sxx if sxx else 0.0


def med(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def rng(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return f"{min(vals):.2f}–{max(vals):.2f}" if len(vals) > 1 else ""


def fmt(v, spec=".2f"):
    return "–" if v is None else format(v, spec)


def plot(res, out, runs):
    data = os.path.join(res, "backlog.dat")
    with open(data, "w") as f:
        for model, _ in MODELS:
            for c, _ in CONTENDERS[1:]:
                r = runs[model][c][0] if runs[model][c] else None
                f.write(f"# {model} {c}\n")
                for t, v in (r["timeline"] if r else []):
                    f.write(f"{t:.2f} {v:.3f}\n")
                f.write("\n\n")
    png = os.path.join(out, "bench-pacing-backlog.png")
    script = [
        "set terminal pngcairo size 1000,420 font ',10'",
        f"set output '{png}'",
        "set multiplot layout 1,2",
        "set xlabel 'seconds into the load'",
        "set ylabel 'backlog (pending MiB)'",
        "set key top left",
    ]
    idx = 0
    for model, title in MODELS:
        script.append(f"set title '{title}' noenhanced")
        parts = []
        for c, name in CONTENDERS[1:]:
            parts.append(f"'{data}' index {idx} with lines lw 2 title '{name}' noenhanced")
            idx += 1
        script.append("plot " + ", ".join(parts))
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)


def main():
    res, out, runtime, reps, elapsed, load = sys.argv[1:7]
    reps = int(reps)
    runs = {m: {c: [r for r in (load_run(res, m, c, k) for k in range(1, reps + 1)) if r]
                for c, _ in CONTENDERS} for m, _ in MODELS}
    lines = [
        "# Benchmark: adaptive pacing (budget=)",
        "",
        f"Written by `tests/bench/pacing` (`make bench`); {reps} interleaved "
        f"repetitions of {runtime} s each, medians (range in brackets); the whole "
        f"run took {float(elapsed):.0f} s; load average at the end {load} on "
        f"{os.cpu_count()} CPUs (the machine is shared: figures move from run to run).",
        "",
        "**Load**, with no idle gap: fio (nbd engine) 4 KiB random writes at QD 8 "
        "over the first GiB and, beside them, 64 KiB TRIMs at 200/s over the "
        "second GiB, 99% in address order and 1% jumping elsewhere (12.5 MiB/s of "
        "TRIMs, as a file system freeing files of about 6 MiB).  **Contenders**: discardcache with budget=2ms; fixed pacing as "
        "btrfs does it (`rate=1000 max-discard=64M idle=0`: at most 1000 discards "
        "per second, 64 MiB each, busy or not); idle-gated as f2fs does it "
        "(`idle=100ms rate=160`: only when clients have been quiet, 8 discards "
        "per 50 ms round); `passthrough=true` (every TRIM forwarded as it "
        "comes).  All cached contenders use `delay=1s`.  The baseline is the "
        "same writes with no TRIMs.",
        "",
        "**Target**: client write p99 within the budget (+10%) of the baseline, "
        "backlog bounded (over the second half of the run it grows by less than "
        "10% of the TRIM rate), and forwarding at least as fast as the best fixed "
        "setting that also meets the budget.",
        "",
    ]
    verdicts = []
    for model, title in MODELS:
        base = med(runs[model]["writes-only"], "p99")
        lines += [f"## {title}", "",
                  "| contender | write p99 ms | extra p99 ms | within budget | write IOPS "
                  "| trim p99 ms | forwarded MiB/s | backlog max MiB | backlog end MiB "
                  "| backlog growth MiB/s | final flush s | overruns |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        status = {}
        for c, name in CONTENDERS:
            rs = runs[model][c]
            if not rs:
                continue
            p99 = med(rs, "p99")
            extra = p99 - base if base is not None else None
            ok = extra is not None and extra <= BUDGET_MS * 1.1
            grow = med(rs, "slope")
            bounded = c == "writes-only" or grow < 0.1 * TRIM_RATE / MiB
            status[c] = dict(ok=ok, bounded=bounded, fwd=med(rs, "fwd"))
            lines.append(
                f"| {name} | {fmt(p99)} ({rng(rs, 'p99')}) | "
                f"{'–' if c == 'writes-only' else fmt(extra, '+.2f')} | "
                f"{'–' if c == 'writes-only' else ('yes' if ok else 'no')} | "
                f"{fmt(med(rs, 'iops'), '.0f')} | {fmt(med(rs, 'trim_p99'))} | "
                f"{fmt(med(rs, 'fwd'))} | {fmt(med(rs, 'backlog_max'), '.1f')} | "
                f"{fmt(med(rs, 'backlog_end'), '.1f')} | {fmt(grow, '+.2f')} | "
                f"{fmt(med(rs, 'flush_s'))} | {fmt(med(rs, 'overruns'), '.0f')} |")
        b = runs[model]["budget"]
        if b:
            lines += ["", f"budget=2ms fitted the device as a = {med(b, 'model_a'):.0f} us per "
                      f"command and b = {med(b, 'model_b') / 1024:.0f} us per MiB "
                      f"(the model is 20000 + 0 on the fixed device, 1000 + 4000 on the "
                      f"proportional one); discards forced by the memory bound: "
                      f"{med(b, 'forced'):.0f}."]
        s = status.get("budget")
        if s:
            fixed_ok = [(status[c]["fwd"], c) for c in FIXED
                        if c in status and status[c]["ok"] and status[c]["bounded"]]
            best = max(fixed_ok) if fixed_ok else None
            fast = best is None or s["fwd"] >= best[0]
            met = s["ok"] and s["bounded"] and fast
            verdicts.append((title, met, s, best))
        lines.append("")
    lines += ["## Target met?", ""]
    for title, met, s, best in verdicts:
        why = [f"p99 within budget: {'yes' if s['ok'] else 'no'}",
               f"backlog bounded: {'yes' if s['bounded'] else 'no'}"]
        if best:
            why.append(f"forwarding {s['fwd']:.2f} MiB/s against {best[0]:.2f} MiB/s "
                       f"for {best[1]}, the best fixed setting that meets the budget")
        else:
            why.append(f"forwarding {s['fwd']:.2f} MiB/s; no fixed setting met the "
                       "budget with a bounded backlog, so there is nothing to match")
        lines.append(f"- {title}: **{'met' if met else 'NOT met'}** ({'; '.join(why)}).")
    lines += ["", "Backlog over time (repetition 1):", "",
              "![backlog over time](bench-pacing-backlog.png)", ""]
    plot(res, out, runs)
    path = os.path.join(out, "benchmarks-pacing.md")
    # Notes written by hand below the marker survive a new run.
    notes = ""
    if os.path.exists(path):
        old = open(path).read()
        if NOTES in old:
            notes = old[old.index(NOTES):]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n" + (notes or NOTES + "\n"))


if __name__ == "__main__":
    main()
