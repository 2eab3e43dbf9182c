"""Checks a timeline trace written by --trace (Chrome trace / Perfetto JSON).

usage: check_trace.py TRACE.json [PROCESS THREAD NAMES SECONDS]

Every complete event ("ph": "X") must sit on a named process and thread, start at or after 0
and last at least 0, and the spans of a track must not overlap; the spans counted in otherData
must be the events. With PROCESS, THREAD, NAMES (comma-separated) and SECONDS: the spans of that
track with those names must add up to SECONDS (relative 1e-5). Exit 1 on a failure, with the
reason.
"""
import json
import sys


def main():
    trace = json.load(open(sys.argv[1]))
    events = trace["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    for e in spans:
        if e["pid"] not in processes or (e["pid"], e["tid"]) not in threads:
            sys.exit(f"event on an unnamed track: {e}")
        if e["ts"] < 0 or e["dur"] < 0:
            sys.exit(f"event with a negative time: {e}")
    tracks = {}
    for e in spans:
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for key, intervals in tracks.items():
        intervals.sort()
        for (_, end), (start, _) in zip(intervals, intervals[1:]):
            if start < end - 1e-6:  # float sums of exact nanoseconds
                sys.exit(f"overlapping spans on {processes[key[0]]} / {threads[key]}")
    if len(spans) != trace["otherData"]["spans"]:
        sys.exit(f"{len(spans)} spans, otherData says {trace['otherData']['spans']}")
    if len(sys.argv) > 2:
        process, thread = sys.argv[2], sys.argv[3]
        names, seconds = sys.argv[4].split(","), float(sys.argv[5])
        total = sum(e["dur"] for e in spans
                    if processes[e["pid"]] == process and threads[(e["pid"], e["tid"])] == thread
                    and e["name"] in names)
        if abs(total * 1e-6 - seconds) > 1e-5 * seconds:  # SECONDS as printed, 6 digits
            sys.exit(f"{process} / {thread}: spans add up to {total * 1e-6} s, expected {seconds}")
    print(f"{len(spans)} spans on {len(threads)} tracks of {len(processes)} processes")


if __name__ == "__main__":
    main()
