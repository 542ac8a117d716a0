#include "aten/ArgConvert.h"

#include <c10/util/Exception.h>

#include "aten/TensorRef.h"

namespace torch_tpu {

c10::TypePtr value_type(const c10::Argument& a) {
  auto t = a.type();
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  return t;
}

bool is_generator_arg(const c10::Argument& a) {
  return value_type(a)->kind() == c10::TypeKind::GeneratorType;
}

bool draws_from_default_generator(const std::string& name) {
  return name.rfind("aten::native_dropout", 0) == 0 &&
         name != "aten::native_dropout_backward";
}

uint64_t random_counters(const std::vector<tpr_type_t>& out_types) {
  // Generous (the counter is 64-bit): no rule draws more than 4 per element.
  uint64_t n = 0;
  for (const auto& t : out_types) n += static_cast<uint64_t>(tpr_type_numel(&t));
  return 4 * n + 4;
}

namespace {

bool is_scalar_arg(const c10::Argument& a) {
  return value_type(a)->kind() == c10::TypeKind::NumberType;
}

bool is_scalar_list_arg(const c10::Argument& a) {
  auto l = value_type(a)->cast<c10::ListType>();
  return l && l->getElementType()->kind() == c10::TypeKind::NumberType;
}

void convert_scalar(const c10::IValue& v, tpr_eager_arg_t& out) {
  out.arg.kind = TPR_ARG_TENSOR;
  out.arg.is_scalar = true;
  if (v.isDouble()) {
    out.scalar_dtype = TPR_DTYPE_F64;
    out.scalar.d = v.toDouble();
  } else if (v.isBool()) {
    out.scalar_dtype = TPR_DTYPE_BOOL;
    out.scalar.b = v.toBool();
  } else if (v.isComplexDouble()) {
    auto c = v.toComplexDouble();
    out.scalar_dtype = TPR_DTYPE_C128;
    out.scalar.c[0] = c.real();
    out.scalar.c[1] = c.imag();
  } else if (v.isSymFloat()) {
    out.scalar_dtype = TPR_DTYPE_F64;
    out.scalar.d = v.toSymFloat().guard_float(__FILE__, __LINE__);
  } else {
    out.scalar_dtype = TPR_DTYPE_S64;
    out.scalar.i = v.isSymInt() ? v.toSymInt().guard_int(__FILE__, __LINE__)
                                : v.toInt();
  }
}

}  // namespace

void convert_arg(ArgStore& st, TensorArgSink& sink,
                 const c10::Argument& schema_arg, const c10::IValue& v,
                 const char* op, tpr_eager_arg_t& out, bool& needs_rng) {
  tpr_arg_t& a = out.arg;
  if (is_generator_arg(schema_arg)) {
    a.kind = TPR_ARG_GENERATOR;
    needs_rng = true;
    return;  // state filled in once out types are known
  }
  if (v.isNone()) {
    a.kind = TPR_ARG_NONE;
  } else if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      a.kind = TPR_ARG_NONE;
      return;
    }
    a.kind = TPR_ARG_TENSOR;
    sink.tensor(t, out);
  } else if (is_scalar_arg(schema_arg) || v.isScalar()) {
    if (is_scalar_arg(schema_arg)) {
      convert_scalar(v, out);
    } else if (v.isDouble()) {
      a.kind = TPR_ARG_DOUBLE;
      a.d = v.toDouble();
    } else if (v.isBool()) {
      a.kind = TPR_ARG_BOOL;
      a.b = v.toBool();
    } else if (v.isInt() || v.isSymInt()) {
      a.kind = TPR_ARG_INT;
      a.i = v.isInt() ? v.toInt() : v.toSymInt().guard_int(__FILE__, __LINE__);
    } else {
      a.kind = TPR_ARG_OTHER;
    }
    // ScalarType arguments are ints in the IValue: map them.
    if (value_type(schema_arg)->kind() == c10::TypeKind::ScalarTypeType &&
        a.kind == TPR_ARG_INT) {
      a.kind = TPR_ARG_DTYPE;
      a.dtype = to_tpr_dtype(static_cast<c10::ScalarType>(a.i));
    }
  } else if (v.isIntList() || v.isSymIntList()) {
    std::vector<int64_t> ints;
    if (v.isIntList()) {
      ints = v.toIntVector();
    } else {
      for (const auto& s : v.toSymIntVector())
        ints.push_back(s.guard_int(__FILE__, __LINE__));
    }
    st.int_lists.push_back(std::move(ints));
    a.kind = TPR_ARG_INT_LIST;
    a.ints = st.int_lists.back().data();
    a.count = static_cast<int32_t>(st.int_lists.back().size());
  } else if (v.isDoubleList()) {
    st.double_lists.push_back(v.toDoubleVector());
    a.kind = TPR_ARG_DOUBLE_LIST;
    a.doubles = st.double_lists.back().data();
    a.count = static_cast<int32_t>(st.double_lists.back().size());
  } else if (v.isBoolList()) {
    auto l = v.toBoolList();
    std::unique_ptr<bool[]> b(new bool[l.size() + 1]);
    for (size_t i = 0; i < l.size(); i++) b[i] = l[i];
    a.kind = TPR_ARG_BOOL_LIST;
    a.bools = b.get();
    a.count = static_cast<int32_t>(l.size());
    st.bool_lists.push_back(std::move(b));
  } else if (is_scalar_list_arg(schema_arg) && v.isList()) {
    std::vector<double> vals;
    bool all_int = true;
    for (const auto& e : v.toListRef()) {
      all_int &= e.isInt() || e.isBool();
      vals.push_back(e.isDouble() ? e.toDouble()
                     : e.isBool() ? static_cast<double>(e.toBool())
                                  : static_cast<double>(e.toInt()));
    }
    a.kind = TPR_ARG_TENSOR_LIST;
    sink.scalar_list(vals, all_int, out);
  } else if (v.isTensorList() || v.isOptionalTensorList() || v.isList()) {
    std::vector<std::optional<at::Tensor>> ts;
    for (const auto& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined())
        ts.emplace_back(e.toTensor());
      else if (e.isNone() || e.isTensor())
        ts.emplace_back(std::nullopt);
      else
        TORCH_CHECK_NOT_IMPLEMENTED(false, op, ": unsupported list argument");
    }
    a.kind = TPR_ARG_TENSOR_LIST;
    sink.tensor_list(ts, out);
  } else if (v.isString()) {
    st.strings.push_back(v.toStringRef());
    a.kind = TPR_ARG_STRING;
    a.s = st.strings.back().c_str();
  } else {
    a.kind = TPR_ARG_OTHER;
  }
}

}  // namespace torch_tpu
