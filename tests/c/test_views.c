// tpr_view_read / tpr_view_write: which path each window takes (by the ops
// in the emitted text) and the errors. Numbers are checked against a C
// reference on the real plugin in test_emit_plugin.c.
#include "harness.h"
#include "tpr/graph.h"

#define L(...) (int64_t[]){__VA_ARGS__}

typedef struct vt {
  tpr_graph_t* g;
  tpr_value_t base;
  char* text;
} vt_t;

static tpr_status_t vt_init(vt_t* t, tpr_dtype_t dtype, int64_t n) {
  t->text = NULL;
  TPR_RETURN_IF_ERROR(tpr_graph_create(&t->g));
  t->base = tpr_parameter(t->g, tpr_type_make(dtype, 1, &n));
  return tpr_ok_status();
}

// Adds |v| as the result and emits; the text stays in t->text.
static tpr_status_t vt_emit(vt_t* t, tpr_value_t v) {
  tpr_graph_add_result(t->g, v);
  size_t len;
  tpr_free(t->text);
  t->text = NULL;
  return tpr_graph_emit_stablehlo(t->g, &t->text, &len);
}

static void vt_free(vt_t* t) {
  tpr_free(t->text);
  tpr_graph_free(t->g);
}

static bool has(const vt_t* t, const char* op) {
  return t->text && strstr(t->text, op) != NULL;
}

TPR_TEST(views_whole_buffer_is_free) {
  vt_t t;
  CHECK_OK(vt_init(&t, TPR_DTYPE_F32, 12));
  tpr_value_t r = tpr_view_read(t.g, t.base, TPR_DTYPE_F32, 1, L(12), L(1), 0);
  CHECK(r == t.base);
  tpr_value_t v = tpr_parameter(t.g, tpr_type_make(TPR_DTYPE_F32, 1, L(12)));
  CHECK(tpr_view_write(t.g, t.base, 1, L(12), L(1), 0, v) == v);
  // 2-D whole window: one reshape, nothing else.
  r = tpr_view_read(t.g, t.base, TPR_DTYPE_F32, 2, L(3, 4), L(4, 1), 0);
  CHECK_OK(vt_emit(&t, r));
  CHECK(has(&t, "stablehlo.reshape"));
  CHECK(!has(&t, "stablehlo.slice") && !has(&t, "stablehlo.gather"));
  vt_free(&t);
}

TPR_TEST(views_fast_paths_avoid_gather) {
  struct {
    int rank;
    int64_t sizes[3], strides[3], offset;
    const char* want;
  } cases[] = {
      {2, {3, 4}, {4, 1}, 5, "stablehlo.slice"},          // contiguous
      {2, {4, 3}, {1, 4}, 0, "stablehlo.transpose"},      // .t()
      {3, {2, 3, 4}, {1, 8, 2}, 0, "stablehlo.transpose"},  // permuted
      {2, {3, 2}, {5, 1}, 1, "stablehlo.slice"},          // narrow()
      {1, {4}, {2}, 1, "strides = array<i64: 2>"},        // x[1::2]
      {3, {3, 1, 4}, {0, 9, 1}, 2, "stablehlo.broadcast_in_dim"},  // expand
      {0, {0}, {0}, 7, "stablehlo.slice"},                // x[7]
      {2, {3, 3}, {10, 3}, 2, "stablehlo.pad"},           // stepped, runs off
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    vt_t t;
    CHECK_OK(vt_init(&t, TPR_DTYPE_F32, 30));
    tpr_value_t r = tpr_view_read(t.g, t.base, TPR_DTYPE_F32, cases[k].rank,
                                  cases[k].sizes, cases[k].strides,
                                  cases[k].offset);
    tpr_status_t s = vt_emit(&t, r);
    bool ok = tpr_status_is_ok(s) && has(&t, cases[k].want) &&
              !has(&t, "stablehlo.gather");
    if (!ok)
      fprintf(stderr, "  case %zu: %s\n%s\n", k, tpr_status_message(s),
              t.text ? t.text : "");
    tpr_status_free(s);
    vt_free(&t);
    CHECK(ok);
  }
}

TPR_TEST(views_exotic_reads_gather) {
  vt_t t;
  CHECK_OK(vt_init(&t, TPR_DTYPE_F32, 10));
  // unfold-like overlap: rows of 4 starting every element
  tpr_value_t r =
      tpr_view_read(t.g, t.base, TPR_DTYPE_F32, 2, L(3, 4), L(1, 1), 0);
  CHECK_OK(vt_emit(&t, r));
  CHECK(has(&t, "stablehlo.gather"));
  CHECK(has(&t, "stablehlo.iota"));
  vt_free(&t);
}

TPR_TEST(views_writes_pick_update_or_scatter) {
  vt_t t;
  CHECK_OK(vt_init(&t, TPR_DTYPE_F32, 20));
  tpr_value_t v = tpr_parameter(t.g, tpr_type_make(TPR_DTYPE_F32, 2, L(3, 4)));
  CHECK_OK(vt_emit(&t, tpr_view_write(t.g, t.base, 2, L(3, 4), L(4, 1), 5, v)));
  CHECK(has(&t, "stablehlo.dynamic_update_slice"));
  CHECK(!has(&t, "stablehlo.scatter"));
  vt_free(&t);

  CHECK_OK(vt_init(&t, TPR_DTYPE_F32, 20));
  v = tpr_parameter(t.g, tpr_type_make(TPR_DTYPE_F32, 2, L(4, 3)));
  CHECK_OK(vt_emit(&t, tpr_view_write(t.g, t.base, 2, L(4, 3), L(1, 4), 0, v)));
  CHECK(has(&t, "stablehlo.transpose"));
  CHECK(!has(&t, "stablehlo.scatter"));
  vt_free(&t);

  CHECK_OK(vt_init(&t, TPR_DTYPE_F32, 20));
  v = tpr_parameter(t.g, tpr_type_make(TPR_DTYPE_F32, 2, L(3, 3)));
  CHECK_OK(vt_emit(&t, tpr_view_write(t.g, t.base, 2, L(3, 3), L(3, 5), 0, v)));
  CHECK(has(&t, "stablehlo.scatter"));
  vt_free(&t);

  // Empty window: the base, unchanged.
  CHECK_OK(vt_init(&t, TPR_DTYPE_F32, 20));
  v = tpr_parameter(t.g, tpr_type_make(TPR_DTYPE_F32, 2, L(0, 3)));
  CHECK(tpr_view_write(t.g, t.base, 2, L(0, 3), L(3, 1), 0, v) == t.base);
  vt_free(&t);
}

// A read of |count| contiguous |dtype| elements from a fresh |n|-element |bd|
// storage, emitted: whether the module has |want|.
static bool read_emits(tpr_dtype_t bd, int64_t n, tpr_dtype_t dtype,
                       int64_t count, const char* want) {
  vt_t t;
  tpr_status_t s = vt_init(&t, bd, n);
  if (!tpr_status_is_ok(s)) {
    tpr_status_free(s);
    return false;
  }
  tpr_value_t r = tpr_view_read(t.g, t.base, dtype, 1, &count, L(1), 0);
  s = vt_emit(&t, r);
  bool ok = tpr_status_is_ok(s) && has(&t, want) &&
            tpr_value_type(t.g, r)->dims[0] == count;
  tpr_status_free(s);
  vt_free(&t);
  return ok;
}

// Storages seen through another element size (torch.save/torch.load move
// storages as bytes): the width-changing bitcast, both ways.
TPR_TEST(views_across_element_sizes) {
  CHECK(read_emits(TPR_DTYPE_F32, 3, TPR_DTYPE_U8, 12,
                   "(tensor<3xf32>) -> tensor<3x4xui8>"));
  // a partial trailing element is left out
  CHECK(read_emits(TPR_DTYPE_U8, 14, TPR_DTYPE_F32, 3,
                   "(tensor<3x4xui8>) -> tensor<3xf32>"));
  vt_t t;
  tpr_value_t r;
  CHECK_OK(vt_init(&t, TPR_DTYPE_U8, 16));
  tpr_value_t v = tpr_parameter(t.g, tpr_type_make(TPR_DTYPE_F32, 1, L(2)));
  r = tpr_view_write(t.g, t.base, 1, L(2), L(1), 1, v);
  CHECK_OK(vt_emit(&t, r));
  CHECK(tpr_value_type(t.g, r)->dtype == TPR_DTYPE_U8);
  CHECK(tpr_value_type(t.g, r)->dims[0] == 16);
  CHECK(has(&t, "(tensor<4xf32>) -> tensor<4x4xui8>"));
  vt_free(&t);

  CHECK_OK(vt_init(&t, TPR_DTYPE_U8, 14));
  v = tpr_parameter(t.g, tpr_type_make(TPR_DTYPE_F32, 1, L(2)));
  CHECK(tpr_view_write(t.g, t.base, 1, L(2), L(1), 0, v) == TPR_VALUE_NONE);
  tpr_status_t s = tpr_graph_status(t.g);
  CHECK(strstr(tpr_status_message(s), "whole number"));
  tpr_status_free(s);
  vt_free(&t);
}

TPR_TEST(views_bitcast_and_errors) {
  vt_t t;
  CHECK_OK(vt_init(&t, TPR_DTYPE_F32, 12));
  tpr_value_t r = tpr_view_read(t.g, t.base, TPR_DTYPE_S32, 1, L(4), L(1), 0);
  CHECK_OK(vt_emit(&t, r));
  CHECK(has(&t, "stablehlo.bitcast_convert"));
  CHECK(tpr_value_type(t.g, r)->dtype == TPR_DTYPE_S32);
  vt_free(&t);

  CHECK_OK(vt_init(&t, TPR_DTYPE_U8, 4));
  r = tpr_view_read(t.g, t.base, TPR_DTYPE_BOOL, 1, L(4), L(1), 0);
  CHECK_OK(vt_emit(&t, r));
  CHECK(has(&t, "\"stablehlo.convert\"(%arg0) : (tensor<4xui8>) -> tensor<4xi1>"));
  vt_free(&t);

  struct {
    tpr_status_code_t code;
    const char* msg;
  } errs[] = {
      {TPR_UNIMPLEMENTED, "different element sizes"},
      {TPR_INVALID_ARGUMENT, "outside the storage"},
      {TPR_INVALID_ARGUMENT, "stride-0"},
      {TPR_INVALID_ARGUMENT, "overlap"},
      {TPR_INVALID_ARGUMENT, "rank 1"},
      {TPR_INVALID_ARGUMENT, "negative"},
      {TPR_INVALID_ARGUMENT, "window shape"},
      {TPR_UNIMPLEMENTED, "different element sizes"},
      {TPR_INVALID_ARGUMENT, "outside the storage"},
  };
  for (int k = 0; k < (int)(sizeof errs / sizeof errs[0]); k++) {
    CHECK_OK(vt_init(&t, TPR_DTYPE_F32, 12));
    tpr_graph_t* g = t.g;
    tpr_value_t v3 = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 2, L(3, 3)));
    tpr_value_t r2;
    switch (k) {
      case 0: r2 = tpr_view_read(g, t.base, TPR_DTYPE_C128, 1, L(2), L(1), 0); break;
      case 1: r2 = tpr_view_read(g, t.base, TPR_DTYPE_F32, 2, L(3, 4), L(4, 1), 1); break;
      case 2: r2 = tpr_view_write(g, t.base, 2, L(3, 3), L(0, 1), 0, v3); break;
      case 3: r2 = tpr_view_write(g, t.base, 2, L(3, 3), L(1, 1), 0, v3); break;
      case 4: r2 = tpr_view_read(g, v3, TPR_DTYPE_F32, 1, L(2), L(1), 0); break;
      case 5: r2 = tpr_view_read(g, t.base, TPR_DTYPE_F32, 1, L(-2), L(1), 0); break;
      case 6: r2 = tpr_view_write(g, t.base, 1, L(9), L(1), 0, v3); break;
      case 7:
        r2 = tpr_view_write(g, t.base, 2, L(3, 3), L(3, 1), 0,
                            tpr_convert(g, v3, TPR_DTYPE_C128));
        break;
      default: r2 = tpr_view_read(g, t.base, TPR_DTYPE_F32, 1, L(2), L(1), -1); break;
    }
    tpr_status_t s = tpr_graph_status(g);
    bool ok = r2 == TPR_VALUE_NONE && tpr_status_code(s) == errs[k].code &&
              strstr(tpr_status_message(s), errs[k].msg);
    if (!ok) fprintf(stderr, "  case %d: '%s'\n", k, tpr_status_message(s));
    tpr_status_free(s);
    vt_free(&t);
    CHECK(ok);
  }
}
