#include "harness.h"

TPR_TEST(status_carries_code_and_message) {
  tpr_status_t s = tpr_status_make(TPR_INVALID_ARGUMENT, "bad %d", 7);
  CHECK(tpr_status_code(s) == TPR_INVALID_ARGUMENT);
  CHECK(strcmp(tpr_status_message(s), "bad 7") == 0);
  s = tpr_status_annotate(s, "aten::add");
  CHECK(strcmp(tpr_status_message(s), "aten::add: bad 7") == 0);
  tpr_status_free(s);
  CHECK(tpr_status_is_ok(tpr_status_make(TPR_OK, "ignored")));
}

TPR_TEST(status_join_keeps_first_error) {
  tpr_status_t a = TPR_ERR(INTERNAL, "first");
  tpr_status_t b = TPR_ERR(UNKNOWN, "second");
  tpr_status_t j = tpr_status_join(a, b);
  CHECK(tpr_status_code(j) == TPR_INTERNAL);
  tpr_status_free(j);
  j = tpr_status_join(tpr_ok_status(), TPR_ERR(UNKNOWN, "x"));
  CHECK(tpr_status_code(j) == TPR_UNKNOWN);
  tpr_status_free(j);
}

TPR_TEST(dtype_table_matches_pjrt_numbering) {
  CHECK(tpr_dtype_size(TPR_DTYPE_BF16) == 2);
  CHECK(tpr_dtype_size(TPR_DTYPE_C128) == 16);
  CHECK(strcmp(tpr_dtype_mlir_name(TPR_DTYPE_U8), "ui8") == 0);
  CHECK(strcmp(tpr_dtype_mlir_name(TPR_DTYPE_BOOL), "i1") == 0);
  CHECK(tpr_dtype_mlir_name((tpr_dtype_t)99) == NULL);
  CHECK(tpr_dtype_size(TPR_DTYPE_INVALID) == 0);
  CHECK(tpr_dtype_is_float(TPR_DTYPE_BF16) && !tpr_dtype_is_float(TPR_DTYPE_S32));
}
