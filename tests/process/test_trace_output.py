"""`tidemark bench --trace FILE` writes Chrome trace-event JSON that trace viewers open:
valid JSON, one named track per actor, and the write path's messages on them."""
import json
import os

from harness import Tidemark, check, finish, parse_args, remove, run_settings, scratch, sets


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    directory = scratch()
    trace_path = directory + ".trace.json"
    try:
        tm.init(directory)
        run = tm.run("bench", "-D", directory, "-c", "2", "-T", "2.5", "--trace", trace_path,
                     *sets(run_settings()))
        check(run.returncode == 0, f"bench exited {run.returncode}: {run.stderr[-1500:]}")
        with open(trace_path) as f:
            trace = json.load(f)
        events = trace["traceEvents"]
        tracks = {e["args"]["name"] for e in events if e.get("ph") == "M"}
        check({"backend", "bgwriter", "checkpointer", "sync_worker"} <= tracks,
              f"missing actor tracks: {sorted(tracks)}")
        names = {e["name"] for e in events if e.get("ph") == "i"}
        for expected in ("sync_register", "fsync", "checkpoint_begin", "sync_phase_request",
                         "checkpoint_record", "bgwriter_write"):
            check(expected in names, f"no {expected} event in the trace (saw {sorted(names)})")
        flows = [e for e in events if e.get("ph") in ("s", "f")]
        check(len(flows) > 0 and len(flows) % 2 == 0, "message arrows are not paired")
        print(f"trace: {len(events)} events on {len(tracks)} tracks", flush=True)
    finally:
        remove(directory)
        if os.path.exists(trace_path):
            os.remove(trace_path)
    finish("trace output")


if __name__ == "__main__":
    main()
