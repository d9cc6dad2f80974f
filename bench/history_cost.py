"""What one order costs the Temporal server, by design: history events by type, and bytes.

    python bench/history_cost.py --orders 20

The server's CPU per order (bench/throughput.py's ``<design>_server_ms``) follows what it
records: each history event is written, and each search-attribute upsert also updates the
workflow's visibility record. This runs N orders on each design (default ``bare-queues,sas``,
bench/_designs.py) one after another, reads each finished history, and prints the median count
of each event type per order, and the history's encoded size. Ends with one line of key=value
figures: ``<design>_events``, ``<design>_history_bytes`` and, per event type that differs
between the designs, ``<design>_<type>``. ``--dump DIR`` writes each design's first order's
history to ``DIR/<design>.json`` (as ``temporal workflow show --output json`` shows it, payloads
decoded by the converter's codec), to read what each byte is.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._designs import ALL, completed, start, start_order
from bench._stack import BenchStack, median, print_summary, sas_client


async def history_of(handle, dump: Path | None = None) -> tuple[Counter[str], Counter[str]]:  # type: ignore[no-untyped-def]
    """An order's events and their encoded bytes, by type (``EVENT_TYPE_`` dropped, lower case);
    the history written to ``dump`` as JSON when given."""
    from temporalio.api.enums.v1 import EventType

    history = await handle.fetch_history()
    if dump is not None:
        dump.write_text(history.to_json())
    count: Counter[str] = Counter()
    size: Counter[str] = Counter()
    for e in history.events:
        kind = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_").lower()
        count[kind] += 1
        size[kind] += e.ByteSize()
    return count, size


async def bench(args: argparse.Namespace) -> dict[str, object]:
    variants = [v for v in ALL if v in args.variants]
    run = uuid.uuid4().hex[:6]
    with BenchStack(keep=args.keep) as stack:
        start(stack, variants)
        client = await sas_client(stack.temporal_address)
        per_design: dict[str, list[tuple[Counter[str], Counter[str]]]] = {}
        for v in variants:
            handles = [await start_order(client, v, i, f"{v}-{run}-{i}") for i in range(args.orders)]
            for h in handles:
                if not completed(await h.result()):
                    raise RuntimeError(f"{v}: an order did not complete")
            dump = args.dump / f"{v}.json" if args.dump else None
            per_design[v] = [await history_of(h, dump if i == 0 else None) for i, h in enumerate(handles)]
    out: dict[str, object] = {"orders": args.orders}
    kinds = sorted({k for histories in per_design.values() for types, _ in histories for k in types})
    typical = {v: {k: median([t[k] for t, _ in hs]) for k in kinds} for v, hs in per_design.items()}
    nbytes = {v: {k: median([b[k] for _, b in hs]) for k in kinds} for v, hs in per_design.items()}
    print(f"{'event type (median per order: count, bytes)':45s} " + " ".join(f"{v:>18s}" for v in variants))
    for k in kinds:
        print(f"{k:45s} " + " ".join(f"{typical[v][k]:6g} {nbytes[v][k]:10g} B" for v in variants))
    for v, histories in per_design.items():
        key = v.replace("-", "_")
        out[f"{key}_events"] = median([sum(t.values()) for t, _ in histories])
        out[f"{key}_history_bytes"] = median([sum(b.values()) for _, b in histories])
    for k in kinds:
        if len({typical[v][k] for v in variants}) > 1:
            for v in variants:
                out[f"{v.replace('-', '_')}_{k}"] = typical[v][k]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, default=20, help="orders per design (default 20)")
    parser.add_argument("--variants", default="bare-queues,sas", help=f"comma-separated designs from {','.join(ALL)}")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory with the logs")
    parser.add_argument("--dump", type=Path, help="write each design's first order's history here, as JSON")
    args = parser.parse_args()
    args.variants = args.variants.split(",")
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
    unknown = set(args.variants) - set(ALL)
    if unknown:
        parser.error(f"unknown designs {sorted(unknown)}; choose from {ALL}")
    print_summary(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
