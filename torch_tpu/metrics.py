"""A readable report of what the runtime did: compiles and their time, cache
hits and misses (memory and disk), executions, host<->device transfers, CPU
fallbacks per op, fused-graph cuts by cause, torch.compile programs, tpu_dist collectives.

    print(torch_tpu.metrics_report())

The counters are ``torch.tpu._get_cache_stats()``; ``torch.tpu._reset_cache_stats()``
resets them."""
import torch


def _mib(n):
    return f"{n / 2**20:.1f} MiB"


def metrics_report():
    s = torch.tpu._get_cache_stats()
    cuts = {k: v for k, v in s["graph_cuts"].items() if v}
    lines = [
        f"compiles: {s['compiles']} ({s['compile_seconds']:.2f} s in XLA)",
        f"executable cache: {s['cache_hits']} hits, {s['cache_misses']} misses, "
        f"{s['cached_executables']} held, {s['cache_evictions']} evicted",
        f"disk cache: {s['disk_hits']} hits, {s['disk_misses']} misses, {s['disk_writes']} "
        f"writes, {s['disk_corrupt']} damaged entries recompiled "
        f"({s['disk_cache_dir'] or 'off'})",
        f"executions: {s['executions']}; ops: {s['ops']}",
        f"host->device: {s['h2d_transfers']} transfers, {_mib(s['h2d_bytes'])}; "
        f"device->host: {s['d2h_transfers']} transfers, {_mib(s['d2h_bytes'])}",
        f"fused eager: {s['fused_ops']} ops in {s['fused_graphs']} graphs, "
        f"{s['pending_ops']} pending; cuts: "
        + (", ".join(f"{k} {v}" for k, v in sorted(cuts.items())) or "none"),
        f"torch.compile: {s.get('compiled_graphs', 0)} graphs, "
        f"{s.get('compiled_recompiles', 0)} recompiles, {s['program_runs']} runs, "
        f"{s['donated_buffers']} donated buffers",
        f"tpu_dist: {s.get('dist_collectives', 0)} collectives, "
        f"{_mib(s.get('dist_staged_bytes', 0))} copied between device and host in "
        f"{s.get('dist_staging_seconds', 0.0):.3f} s, "
        f"{_mib(s.get('dist_zero_copy_bytes', 0))} without a copy, "
        f"{s.get('dist_compute_wait_seconds', 0.0):.3f} s waiting for inputs to be computed, "
        f"{s.get('dist_transport_seconds', 0.0):.3f} s "
        f"waiting on the transport, {s.get('dist_agreement_checks', 0)} agreement checks",
        "CPU fallbacks: " + (", ".join(f"{op} x{n}" for op, n in
                                       sorted(s["fallbacks"].items())) or "none"),
    ]
    return "\n".join(lines)
