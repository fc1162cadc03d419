"""Figures of one failover run (ensemble.sh section 3, issue 16).

usage: python3 failover.py TIMELINE KILL_MS

TIMELINE is failover.c's output ("start_ms <epoch ms>", then "<ms> <acks>" lines);
KILL_MS the epoch ms at which the leader was killed. Prints "GAP_MS RECOVER_MS BASE_PER_S":
- BASE_PER_S: acknowledged sets per second over the 2 s before the kill (from 0.5 s in);
- GAP_MS: the write gap seen by the clients, the longest time without an acknowledged
  set among the acks from the last one before the kill on (so acks of sets already
  committed that land just after the kill do not hide the outage);
- RECOVER_MS: from the kill to the end of the first 500 ms window, after the gap began,
  whose ack rate is at least 90 % of BASE_PER_S.
A figure that cannot be had (no ack after the kill, never recovered) prints as FAIL.
"""
import sys

WINDOW_MS = 500


def main():
    path, kill_ms = sys.argv[1], int(sys.argv[2])
    start, acks = None, {}
    with open(path) as f:
        for line in f:
            a, b = line.split()
            if a == "start_ms":
                start = int(b)
            else:
                acks[int(a)] = int(b)
    if start is None or not acks:
        print("FAIL FAIL FAIL")
        return
    k = kill_ms - start
    end = max(acks)
    b0 = max(500, k - 2000)
    base_per_ms = sum(v for t, v in acks.items() if b0 <= t < k) / max(1, k - b0)
    times = sorted(acks)
    before = [t for t in times if t < k]
    after = [t for t in times if t >= (before[-1] if before else k)]
    gaps = [b - a for a, b in zip(after, after[1:])]
    gap = max(gaps) if gaps and times[-1] >= k else None
    recover = None
    if gap is not None and base_per_ms > 0:
        gap_start = next(a for a, b in zip(after, after[1:]) if b - a == gap)
        counts = [0] * (end + 2)
        for t, v in acks.items():
            counts[t] += v
        prefix = [0]
        for c in counts:
            prefix.append(prefix[-1] + c)
        need = 0.9 * base_per_ms * WINDOW_MS
        for w in range(gap_start, end - WINDOW_MS + 2):
            if prefix[w + WINDOW_MS] - prefix[w] >= need:
                recover = w + WINDOW_MS - k
                break
    fmt = lambda v: "FAIL" if v is None else str(v)
    print(fmt(gap), fmt(recover), round(base_per_ms * 1000))


if __name__ == "__main__":
    main()
