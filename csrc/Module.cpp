// Python bindings: torch_tpu._C. Importing it registers the allocator,
// guard, hooks and kernels (static initialisers); nothing here starts the
// runtime until a device is first used.
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include "aten/ArgChecks.h"
#include "aten/Dispatch.h"
#include "compile/Program.h"
#include "core/TpuContext.h"
#include "core/TpuGenerator.h"
#include "core/TpuStatus.h"
#include "distributed/Bindings.h"
#include "kernels/Kernel.h"

extern "C" {
#include "tpr/program.h"
}

namespace py = pybind11;
using namespace torch_tpu;

namespace {

py::dict plugin_info() {
  ensure_initialized();
  tpr_client_t* c = tpr_eager_client();
  tpr_plugin_info_t info;
  tpr_plugin_get_info(tpr_client_plugin(c), &info);
  py::dict d;
  d["path"] = info.path ? info.path : "";
  static const char* kinds[] = {"other", "cpu", "cuda", "tpu"};
  d["kind"] = kinds[info.kind >= 0 && info.kind <= 3 ? info.kind : 0];
  d["api_version"] = py::make_tuple(info.api_major, info.api_minor);
  d["xla_version"] = info.xla_version;
  d["stablehlo_current_version"] =
      py::make_tuple(info.stablehlo_current_version[0],
                     info.stablehlo_current_version[1],
                     info.stablehlo_current_version[2]);
  d["stablehlo_minimum_version"] =
      py::make_tuple(info.stablehlo_minimum_version[0],
                     info.stablehlo_minimum_version[1],
                     info.stablehlo_minimum_version[2]);
  d["platform_name"] = tpr_client_platform_name(c);
  d["platform_version"] = tpr_client_platform_version(c);
  return d;
}

py::dict memory_stats(int device) {
  check_device_index(device);
  tpr_memory_stats_t m;
  check(tpr_client_memory_stats(tpr_eager_client(), device, &m));
  py::dict d;
  d["bytes_in_use"] = m.bytes_in_use;
  d["peak_bytes_in_use"] = m.peak_bytes_in_use;
  d["bytes_limit"] = m.bytes_limit;
  d["bytes_free"] = m.bytes_free;
  d["num_buffers"] = m.num_buffers;
  d["from_plugin"] = m.from_plugin;
  d["storage_bytes"] = tpr_storage_bytes_in_use(device);
  d["num_ooms"] = oom_count.load();
  return d;
}

py::dict runtime_stats() {
  tpr_runtime_stats_t r;
  tpr_runtime_get_stats(&r);
  tpr_eager_stats_t e;
  tpr_eager_get_stats(&e);
  py::dict d;
  d["compiles"] = r.compiles;
  d["compile_seconds"] = r.compile_seconds;
  d["background_compiles"] = r.background_compiles;
  d["background_compile_seconds"] = r.background_compile_seconds;
  d["first_tier_compiles"] = r.first_tier_compiles;
  d["upgrades"] = r.upgrades;
  d["upgrade_seconds"] = r.upgrade_seconds;
  tpr_tierup_stats_t t;
  tpr_eager_get_tierup_stats(&t);
  d["upgrades_pending"] = t.pending;
  d["upgrade_failures"] = t.failures;
  d["executions"] = r.executions;
  d["h2d_transfers"] = r.h2d_transfers;
  d["h2d_bytes"] = r.h2d_bytes;
  d["d2h_transfers"] = r.d2h_transfers;
  d["d2h_bytes"] = r.d2h_bytes;
  d["ops"] = e.ops;
  d["cache_hits"] = e.cache_hits;
  d["replayed_ops"] = e.replayed_ops;
  d["cache_misses"] = e.cache_misses;
  d["cached_executables"] = e.cached_executables;
  d["cache_evictions"] = e.cache_evictions;
  d["fused_ops"] = e.fused_ops;
  d["fused_graphs"] = e.fused_graphs;
  d["host_fills"] = e.host_fills;
  d["pending_ops"] = e.pending_ops;
  py::dict cuts;
  for (int c = 0; c < TPR_CUT_COUNT_; c++)
    cuts[tpr_cut_cause_name(static_cast<tpr_cut_cause_t>(c))] = e.cuts[c];
  d["graph_cuts"] = cuts;
  tpr_program_stats_t ps;
  tpr_program_get_stats(&ps);
  d["program_compiles"] = ps.programs_compiled;
  d["program_cache_hits"] = ps.programs_cached;
  d["program_runs"] = ps.runs;
  d["donated_buffers"] = ps.donated_buffers + e.donated_buffers;
  tpr_disk_cache_stats_t dc;
  tpr_disk_cache_get_stats(&dc);
  d["disk_cache_dir"] = tpr_disk_cache_dir();
  d["disk_hits"] = dc.hits;
  d["disk_misses"] = dc.misses;
  d["disk_writes"] = dc.writes;
  d["disk_corrupt"] = dc.corrupt;
  d["disk_evictions"] = dc.evictions;
  py::dict fb;
  for (const auto& kv : fallback_counts_snapshot()) fb[py::str(kv.first)] = kv.second;
  d["fallbacks"] = fb;
  d["meta_cache_entries"] = meta_cache_entries();
  return d;
}

py::list lowered_ops() {
  size_t n = 0;
  const tpr_rule_t* rules = tpr_rule_table(&n);
  py::list l;
  for (size_t i = 0; i < n; i++) l.append(rules[i].name);
  return l;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native core";
  m.def("_set_search_dirs", &set_search_dirs);
  m.def("_init", &ensure_initialized);
  m.def("_try_init", &try_initialize);
  m.def("_is_initialized", &device_in_use);
  m.def("_is_in_bad_fork", [] { return tpr_eager_in_bad_fork(); });
  m.def("_device_count", [] { return static_cast<int>(device_count()); });
  m.def("_current_device", [] {
    // As torch.cuda.current_device(): asking initializes the device.
    if (try_initialize()) ensure_initialized();
    return static_cast<int>(current_device());
  });
  m.def("_set_device", [](int d) { set_current_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_synchronize", [](int d) {
    if (!is_initialized()) return;
    py::gil_scoped_release nogil;
    check(tpr_eager_synchronize(d));
    raise_failed_data_checks();
  });
  m.def("_wait_for_upgrades", [](double timeout) {
    py::gil_scoped_release nogil;
    return tpr_program_wait_for_compiles(timeout) && tpr_eager_wait_for_upgrades(timeout);
  });
  m.def("_device_kind", [](int d) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    return std::string(tpr_client_device_kind(tpr_eager_client(), d));
  });
  m.def("_plugin_info", &plugin_info);
  m.def("_memory_stats", &memory_stats);
  m.def("_reset_peak_memory_stats", [](int d) {
    if (is_initialized()) tpr_client_reset_peak_memory(tpr_eager_client(), d);
  });
  m.def("_empty_cache", [] {
    if (is_initialized()) tpr_client_empty_cache(tpr_eager_client());
  });
  m.def("_runtime_stats", &runtime_stats);
  m.def("_reset_runtime_stats", [] {
    tpr_runtime_reset_stats();
    tpr_eager_reset_stats();
    tpr_disk_cache_reset_stats();
    tpr_program_reset_stats();
    reset_fallback_counts();
  });
  m.def("_set_launch_blocking", [](bool on) { tpr_eager_set_launch_blocking(on); });
  m.def("_launch_blocking", [] { return tpr_eager_launch_blocking(); });
  m.def("_set_fused", [](bool on) {
    py::gil_scoped_release nogil;
    check(tpr_eager_set_fused(on));
  });
  m.def("_fused", [] { return tpr_eager_fused(); });
  m.def("_set_fuse_max_ops", [](int64_t n) { tpr_eager_set_fuse_max_ops(n); });
  m.def("_flush", [] {
    if (!is_initialized()) return;
    py::gil_scoped_release nogil;
    check(tpr_eager_flush(TPR_CUT_EXPLICIT));
  });
  m.def("_lowered_ops", &lowered_ops);
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(
        default_generator(static_cast<c10::DeviceIndex>(d))));
  });
  m.def("_live_c_allocations", [] { return tpr_live_allocations(); });
  init_kernel_bindings(m);
  init_program_bindings(m);
  init_distributed_bindings(m);
}
