// Argument checks that PyTorch's CPU kernels make and that tpu would
// otherwise skip. tpu learns result types from PyTorch's meta kernels, run on
// meta twins that share no storage (and meta data pointers carry no
// offsets), so no check that compares arguments' memory fires there; and
// some CPU kernels check arguments in code that no meta kernel shares.
// These checks read metadata and Python scalars only and run before any
// device work; check_argument_data adds the ones that read tensor data.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include "tpr/lower.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace torch_tpu {

struct ArgChecks;  // what applies to one op overload

// The checks for |op| (named |name|, "aten::cat.out"); nullptr when none
// apply. Looked up once per schema.
const ArgChecks* find_arg_checks(const c10::OperatorHandle& op, const std::string& name);

// Runs |checks| on a call's arguments (the last |schema.arguments().size()|
// entries of |stack|); throws PyTorch's exception for a bad call. Some of
// them apply before out= arguments are resized to the result's shape, the
// others (|resized|) after, as in the CPU kernels.
void run_arg_checks(const ArgChecks& checks, const c10::FunctionSchema& schema,
                    const std::string& name, const torch::jit::Stack& stack, bool resized);

// A tensor an op writes must not have elements that share memory
// (expanded views): PyTorch refuses most such writes and tpu cannot make
// any of them.
void check_writable(const std::string& name, const at::Tensor& t);

// The written tensor |out| must not share memory with input |in| (named
// |what| in the message): no overlap at all, or with |partial_only| no
// partial overlap (the same elements in the same layout are allowed).
void check_no_overlap(const std::string& name, const at::Tensor& out, const char* what,
                      const at::Tensor& in, bool partial_only);

// The checks that read tensor data (index bounds, class targets,
// probability values, tensor fill values). Their values are computed on the
// device; debug eager reads them at once (a round trip per op), strict and
// fused eager at the next raise_failed_data_checks.
void check_argument_data(const std::string& name, const torch::jit::Stack& args);
// Whether overload |name| ("aten::gather.out") has such checks (decided once
// per op, so other ops pay nothing for them).
bool has_data_checks(const std::string& name);

// A check of an index tensor's entries (their least and greatest, as
// tpu::index_range computes them) found while lowering an op into a
// compiled graph: the graph computes the range as an extra output, and each
// run queues |judge| on it as strict eager queues its own checks.
struct RangeCheck {
  at::Tensor index;              // the op's index argument (a stand-in)
  std::optional<int64_t> ignore;  // entries equal to it are left out
  std::function<void(const std::vector<at::Tensor>& host, const char* note)> judge;
};
// The index and class-target checks PyTorch's CPU kernel makes for |name|
// on |args| (stand-in tensors).
std::vector<RangeCheck> collect_range_checks(const std::string& name,
                                             const torch::jit::Stack& args);
// tpu::index_range's arguments after the index: the value left out and
// whether one is (eager and compiled graphs call the rule alike).
void set_index_range_args(std::optional<int64_t> ignore, tpr_arg_t* value, tpr_arg_t* ignoring);
// Queues |check|'s judge on |range|, the s64[2] a compiled run computed.
void submit_range_check(const RangeCheck& check, const at::Tensor& range);

// Judges the data checks still waiting and throws the first failure's
// exception. Called wherever the host waits for the device anyway: reads to
// the host and synchronize().
void raise_failed_data_checks();

}  // namespace torch_tpu
