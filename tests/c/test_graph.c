// The graph IR: types, builders' checks and result types, sticky errors,
// parameters/results/aliases, hashing, reset, and build+hash speed.
#include <time.h>

#include "harness.h"
#include "test_emit_samples.h"
#include "tpr/graph.h"

#define T(dt, ...)                                                         \
  tpr_type_make(TPR_DTYPE_##dt,                                            \
                (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                (int64_t[]){__VA_ARGS__})
#define L(...) (int64_t[]){__VA_ARGS__}

static bool type_is(const tpr_graph_t* g, tpr_value_t v, tpr_type_t want) {
  return tpr_type_equal(tpr_value_type(g, v), &want);
}

// The graph's error message, copied into |buf| (for CHECK_STR_CONTAINS).
static const char* graph_message(const tpr_graph_t* g, char* buf, size_t cap) {
  tpr_status_t s = tpr_graph_status(g);
  snprintf(buf, cap, "%s", tpr_status_message(s));
  tpr_status_free(s);
  return buf;
}

TPR_TEST(graph_types_format_and_compare) {
  tpr_type_t a = T(F32, 2, 3), b = T(F32, 2, 3), c = T(F32, 3, 2);
  char buf[64];
  CHECK(strcmp(tpr_type_format(&a, buf, sizeof buf), "f32[2,3]") == 0);
  tpr_type_t s = tpr_type_scalar(TPR_DTYPE_BOOL);
  CHECK(strcmp(tpr_type_format(&s, buf, sizeof buf), "bool[]") == 0);
  CHECK(tpr_type_equal(&a, &b));
  CHECK(!tpr_type_equal(&a, &c));
  CHECK(tpr_type_numel(&a) == 6);
  CHECK(tpr_type_numel(&s) == 1);
  tpr_type_t z = T(S64, 4, 0);
  CHECK(tpr_type_numel(&z) == 0);
  tpr_type_t big = tpr_type_make(TPR_DTYPE_F32, 99, NULL);  // no overflow
  CHECK(big.rank == 99);
  CHECK(strlen(tpr_type_format(&big, buf, 8)) < 8);
}

TPR_TEST(graph_builders_compute_result_types) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, T(F32, 2, 3));
  tpr_value_t y = tpr_parameter(g, T(F32, 3));
  CHECK(tpr_graph_num_parameters(g) == 2);
  CHECK(type_is(g, tpr_broadcast_to(g, y, 2, L(2, 3)), T(F32, 2, 3)));
  CHECK(type_is(g, tpr_transpose(g, x, L(1, 0)), T(F32, 3, 2)));
  CHECK(type_is(g, tpr_slice(g, x, L(0, 0), L(2, 3), L(1, 2)), T(F32, 2, 2)));
  CHECK(type_is(g, tpr_reduce(g, x, TPR_REDUCE_SUM, L(1), 1), T(F32, 2)));
  CHECK(type_is(g, tpr_compare(g, TPR_CMP_LT, x, x), T(BOOL, 2, 3)));
  CHECK(type_is(g, tpr_unary(g, TPR_UNARY_IS_FINITE, x), T(BOOL, 2, 3)));
  CHECK(type_is(g, tpr_convert(g, x, TPR_DTYPE_BF16), T(BF16, 2, 3)));
  tpr_value_t parts[2] = {x, x};
  CHECK(type_is(g, tpr_concatenate(g, parts, 2, 1), T(F32, 2, 6)));
  CHECK(type_is(g,
                tpr_pad(g, x, tpr_constant_f64(g, TPR_DTYPE_F32, 0), L(1, 0),
                        L(0, 2), L(0, 1)),
                T(F32, 3, 7)));
  tpr_value_t lhs = tpr_parameter(g, T(BF16, 4, 2, 8));
  tpr_value_t rhs = tpr_parameter(g, T(BF16, 4, 8, 5));
  CHECK(type_is(g,
                tpr_dot_general(g, lhs, rhs, 1, L(0), L(0), 1, L(2), L(1),
                                TPR_DTYPE_F32),
                T(F32, 4, 2, 5)));
  tpr_value_t v, i;
  tpr_argreduce(g, x, 0, true, &v, &i);
  CHECK(v != TPR_VALUE_NONE && i == v + 1);
  CHECK(type_is(g, v, T(F32, 3)));
  CHECK(type_is(g, i, T(S64, 3)));
  tpr_value_t idx = tpr_parameter(g, T(S32, 5));
  CHECK(type_is(g, tpr_index_select(g, x, 1, idx), T(F32, 2, 5)));
  CHECK(type_is(g, tpr_take_1d(g, y, idx), T(F32, 5)));
  tpr_value_t st = tpr_parameter(g, T(U64, 2)), bits, ns;
  tpr_rng_bits(g, st, T(U32, 7), &bits, &ns);
  CHECK(type_is(g, bits, T(U32, 7)));
  CHECK(type_is(g, ns, T(U64, 2)));
  tpr_value_t c = tpr_parameter(g, T(C64, 2));
  CHECK(type_is(g, tpr_unary(g, TPR_UNARY_ABS, c), T(F32, 2)));
  CHECK(type_is(g, tpr_convert(g, c, TPR_DTYPE_F64), T(F64, 2)));
  CHECK(tpr_graph_ok(g));
  tpr_graph_free(g);
}

TPR_TEST(graph_noop_builders_return_their_operand) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, T(F32, 2, 3));
  CHECK(tpr_reshape(g, x, 2, L(2, 3)) == x);
  CHECK(tpr_transpose(g, x, L(0, 1)) == x);
  CHECK(tpr_convert(g, x, TPR_DTYPE_F32) == x);
  CHECK(tpr_bitcast_convert(g, x, TPR_DTYPE_F32) == x);
  CHECK(tpr_slice(g, x, L(0, 0), L(2, 3), NULL) == x);
  CHECK(tpr_broadcast_to(g, x, 2, L(2, 3)) == x);
  CHECK(tpr_reverse(g, x, NULL, 0) == x);
  CHECK(tpr_concatenate(g, &x, 1, 0) == x);
  CHECK(tpr_slice(g, x, L(0, 0), L(2, 3), L(1, 5)) != x);  // [2,1]
  tpr_graph_free(g);
}

TPR_TEST(graph_builders_reject_bad_operands) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  char msg[512];
  tpr_value_t x = tpr_parameter(g, T(F32, 2, 3));
  tpr_value_t y = tpr_parameter(g, T(F32, 3, 2));
  // Mismatched binary operands name the builder and both types.
  CHECK(tpr_binary(g, TPR_BINARY_ADD, x, y) == TPR_VALUE_NONE);
  CHECK(!tpr_graph_ok(g));
  graph_message(g, msg, sizeof msg);
  CHECK_STR_CONTAINS(msg, "tpr_binary");
  CHECK_STR_CONTAINS(msg, "f32[2,3]");
  CHECK_STR_CONTAINS(msg, "f32[3,2]");
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  // Sticky: later good builders return NONE, first error kept.
  CHECK(tpr_unary(g, TPR_UNARY_EXP, x) == TPR_VALUE_NONE);
  CHECK(tpr_reshape(g, x, 1, L(99)) == TPR_VALUE_NONE);
  CHECK_STR_CONTAINS(graph_message(g, msg, sizeof msg), "tpr_binary");
  tpr_graph_reset(g);
  CHECK(tpr_graph_ok(g));
  CHECK(tpr_graph_num_parameters(g) == 0);

  struct {
    const char* who;
    tpr_status_code_t code;
  } cases[] = {
      {"tpr_reshape", TPR_INVALID_ARGUMENT},
      {"tpr_transpose", TPR_INVALID_ARGUMENT},
      {"tpr_slice", TPR_INVALID_ARGUMENT},
      {"tpr_broadcast_in_dim", TPR_INVALID_ARGUMENT},
      {"tpr_unary", TPR_INVALID_ARGUMENT},
      {"tpr_dot_general", TPR_INVALID_ARGUMENT},
      {"tpr_reduce", TPR_INVALID_ARGUMENT},
      {"tpr_concatenate", TPR_INVALID_ARGUMENT},
      {"tpr_parameter", TPR_INVALID_ARGUMENT},
      {"tpr_select", TPR_INVALID_ARGUMENT},
      {"tpr_iota", TPR_INVALID_ARGUMENT},
      {"operand #0 (77)", TPR_INVALID_ARGUMENT},
      {"TPR_VALUE_NONE", TPR_INVALID_ARGUMENT},
      {"tpr_constant_f64", TPR_INVALID_ARGUMENT},
      {"tpr_dynamic_slice", TPR_INVALID_ARGUMENT},
      {"tpr_rng_bits", TPR_INVALID_ARGUMENT},
      {"tpr_take_1d", TPR_INVALID_ARGUMENT},
      {"tpr_graph_alias", TPR_INVALID_ARGUMENT},
      {"tpr_compare", TPR_INVALID_ARGUMENT},
      {"tpr_pad", TPR_INVALID_ARGUMENT},
  };
  int n = (int)(sizeof cases / sizeof cases[0]);
  for (int k = 0; k < n; k++) {
    tpr_graph_reset(g);
    x = tpr_parameter(g, T(F32, 2, 3));
    tpr_value_t b = tpr_parameter(g, T(BOOL, 2));
    tpr_value_t r = 0, tmp;
    switch (k) {
      case 0: r = tpr_reshape(g, x, 2, L(4, 2)); break;
      case 1: r = tpr_transpose(g, x, L(0, 0)); break;
      case 2: r = tpr_slice(g, x, L(0, 2), L(2, 4), NULL); break;
      case 3: r = tpr_broadcast_in_dim(g, x, 2, L(2, 4), L(0, 1)); break;
      case 4: r = tpr_unary(g, TPR_UNARY_EXP, b); break;
      case 5:
        r = tpr_dot_general(g, x, x, 0, NULL, NULL, 1, L(1), L(0),
                            TPR_DTYPE_F32);
        break;
      case 6: r = tpr_reduce(g, x, TPR_REDUCE_SUM, L(2), 1); break;
      case 7: r = tpr_concatenate(g, (tpr_value_t[]){x, b}, 2, 0); break;
      case 8: r = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, TPR_MAX_RANK + 1, NULL)); break;
      case 9: r = tpr_select(g, x, x, x); break;
      case 10: r = tpr_iota(g, T(F32, 3), 1); break;
      case 11: r = tpr_unary(g, TPR_UNARY_EXP, 77); break;
      case 12: r = tpr_unary(g, TPR_UNARY_EXP, TPR_VALUE_NONE); break;
      case 13: r = tpr_constant_f64(g, (tpr_dtype_t)42, 1.0); break;
      case 14:
        tmp = tpr_constant_i64(g, TPR_DTYPE_S32, 0);
        r = tpr_dynamic_slice(g, x, (tpr_value_t[]){tmp, tmp}, L(3, 1));
        break;
      case 15: tpr_rng_bits(g, x, T(U32, 2), &r, &tmp); break;
      case 16: r = tpr_take_1d(g, x, b); break;
      case 17:
        tpr_graph_add_result(g, b);
        tpr_graph_alias(g, 0, 0);  // f32[2,3] vs bool[2]
        r = TPR_VALUE_NONE;
        break;
      case 18: r = tpr_compare(g, TPR_CMP_LT, x, b); break;
      case 19:
        r = tpr_pad(g, x, tpr_constant_f64(g, TPR_DTYPE_F32, 0), L(0, -5),
                    L(0, 0), NULL);
        break;
    }
    if (r != TPR_VALUE_NONE || tpr_graph_ok(g)) {
      fprintf(stderr, "  case %d (%s) was accepted\n", k, cases[k].who);
      CHECK(false);
    }
    graph_message(g, msg, sizeof msg);
    if (!strstr(msg, cases[k].who)) {
      fprintf(stderr, "  case %d: message '%s' lacks '%s'\n", k, msg,
              cases[k].who);
      CHECK(false);
    }
    CHECK_STATUS(tpr_graph_status(g), cases[k].code);
  }
  tpr_graph_free(g);
}

TPR_TEST(graph_value_type_pointers_stay_valid) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, T(F32, 3, 5));
  const tpr_type_t* t = tpr_value_type(g, x);
  tpr_value_t y = x;
  for (int i = 0; i < 5000; i++) y = tpr_unary(g, TPR_UNARY_NEG, y);
  CHECK(tpr_graph_ok(g));
  CHECK(t == tpr_value_type(g, x));
  CHECK(t->rank == 2 && t->dims[0] == 3 && t->dims[1] == 5);
  tpr_graph_reset(g);  // blocks are kept: same storage after reset
  x = tpr_parameter(g, T(S8, 7));
  CHECK(tpr_value_type(g, x) == t && t->dtype == TPR_DTYPE_S8);
  tpr_graph_free(g);
}

TPR_TEST(graph_fail_first_error_wins) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  CHECK(tpr_graph_fail(g, TPR_UNIMPLEMENTED, "first %d", 1) == TPR_VALUE_NONE);
  tpr_graph_fail(g, TPR_INTERNAL, "second");
  tpr_status_t s = tpr_graph_status(g);
  CHECK(tpr_status_code(s) == TPR_UNIMPLEMENTED);
  CHECK(strcmp(tpr_status_message(s), "first 1") == 0);
  tpr_status_free(s);
  char* text;
  size_t len;
  CHECK_STATUS(tpr_graph_emit_stablehlo(g, &text, &len), TPR_UNIMPLEMENTED);
  tpr_value_t v1, v2;
  tpr_argreduce(g, 0, 0, true, &v1, &v2);
  CHECK(v1 == TPR_VALUE_NONE && v2 == TPR_VALUE_NONE);
  CHECK(tpr_graph_add_result(g, 0) == -1);
  const tpr_type_t* t = tpr_value_type(g, TPR_VALUE_NONE);
  CHECK(t != NULL && t->dtype == TPR_DTYPE_INVALID);
  tpr_graph_free(g);
}

TPR_TEST(graph_results_and_aliases) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, T(F32, 4));
  tpr_value_t y = tpr_parameter(g, T(F32, 4));
  tpr_value_t s = tpr_binary(g, TPR_BINARY_ADD, x, y);
  CHECK(tpr_graph_add_result(g, s) == 0);
  CHECK(tpr_graph_add_result(g, x) == 1);
  CHECK(tpr_graph_num_results(g) == 2);
  CHECK(tpr_graph_result(g, 0) == s);
  CHECK(tpr_graph_result(g, 5) == TPR_VALUE_NONE);
  CHECK(tpr_graph_result_alias(g, 0) == -1);
  tpr_graph_alias(g, 1, 0);
  CHECK(tpr_graph_ok(g));
  CHECK(tpr_graph_result_alias(g, 0) == 1);
  CHECK(tpr_graph_result_alias(g, 9) == -1);
  tpr_graph_alias(g, 1, 1);  // parameter 1 already donated to result 0
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_free(g);
}

// Builds a typical one-op eager graph: a view read, an op, a write-back.
static void build_eager(tpr_graph_t* g, double c, int64_t dim) {
  tpr_value_t base = tpr_parameter(g, T(F32, 64));
  tpr_value_t other = tpr_parameter(g, T(F32, 4, 8));
  tpr_value_t x = tpr_view_read(g, base, TPR_DTYPE_F32, 2, L(4, 8), L(1, 4), 0);
  tpr_value_t k = tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, c), 2,
                                   L(4, 8));
  tpr_value_t y = tpr_binary(g, TPR_BINARY_MUL, tpr_binary(g, TPR_BINARY_ADD,
                                                           x, other), k);
  tpr_value_t r = tpr_reduce(g, y, TPR_REDUCE_SUM, &dim, 1);
  tpr_graph_add_result(g, r);
  tpr_graph_add_result(g, tpr_view_write(g, base, 2, L(4, 8), L(1, 4), 0, y));
  tpr_graph_alias(g, 0, 1);
}

TPR_TEST(graph_hash_is_structural) {
  tpr_graph_t *a, *b;
  CHECK_OK(tpr_graph_create(&a));
  CHECK_OK(tpr_graph_create(&b));
  uint64_t ha[2], hb[2];
  build_eager(a, 2.0, 1);
  build_eager(b, 2.0, 1);
  CHECK(tpr_graph_ok(a));
  tpr_graph_hash(a, ha);
  tpr_graph_hash(b, hb);
  CHECK(ha[0] == hb[0] && ha[1] == hb[1]);
  CHECK(ha[0] != ha[1]);
  // Different constant, different attribute, different alias: all differ.
  tpr_graph_reset(b);
  build_eager(b, 3.0, 1);
  tpr_graph_hash(b, hb);
  CHECK(ha[0] != hb[0] && ha[1] != hb[1]);
  tpr_graph_reset(b);
  build_eager(b, 2.0, 0);
  tpr_graph_hash(b, hb);
  CHECK(ha[0] != hb[0] && ha[1] != hb[1]);
  // Reset + rebuild gives the same hash as a fresh graph.
  tpr_graph_reset(b);
  build_eager(b, 2.0, 1);
  tpr_graph_hash(b, hb);
  CHECK(ha[0] == hb[0] && ha[1] == hb[1]);
  // Types and ops matter; so does an alias.
  uint64_t h1[2], h2[2], h3[2], h4[2], h5[2];
  tpr_graph_reset(b);
  tpr_graph_add_result(b, tpr_unary(b, TPR_UNARY_EXP, tpr_parameter(b, T(F32, 4))));
  tpr_graph_hash(b, h1);
  tpr_graph_reset(b);
  tpr_graph_add_result(b, tpr_unary(b, TPR_UNARY_LOG, tpr_parameter(b, T(F32, 4))));
  tpr_graph_hash(b, h2);
  tpr_graph_reset(b);
  tpr_graph_add_result(b, tpr_unary(b, TPR_UNARY_EXP, tpr_parameter(b, T(F32, 5))));
  tpr_graph_hash(b, h3);
  tpr_graph_reset(b);
  tpr_graph_add_result(b, tpr_unary(b, TPR_UNARY_EXP, tpr_parameter(b, T(F64, 4))));
  tpr_graph_hash(b, h4);
  tpr_graph_alias(b, 0, 0);
  tpr_graph_hash(b, h5);
  CHECK(h1[0] != h2[0] && h1[0] != h3[0] && h1[0] != h4[0] && h4[0] != h5[0]);
  CHECK(h1[1] != h2[1] && h1[1] != h3[1] && h1[1] != h4[1] && h4[1] != h5[1]);
  // Dense constant bytes matter.
  float d1[3] = {1, 2, 3}, d2[3] = {1, 2, 4};
  tpr_graph_reset(b);
  tpr_graph_add_result(b, tpr_constant_dense(b, T(F32, 3), d1));
  tpr_graph_hash(b, h1);
  tpr_graph_reset(b);
  tpr_graph_add_result(b, tpr_constant_dense(b, T(F32, 3), d2));
  tpr_graph_hash(b, h2);
  CHECK(h1[0] != h2[0] && h1[1] != h2[1]);
  tpr_graph_free(a);
  tpr_graph_free(b);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

TPR_TEST(graph_build_and_hash_are_fast) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  uint64_t h[2], sink = 0;
  int iters = 20000;
  for (int i = 0; i < 100; i++) {  // warm: capacity reached
    tpr_graph_reset(g);
    build_eager(g, 2.0, 1);
  }
  int64_t live = tpr_live_allocations();
  double t0 = now_us();
  for (int i = 0; i < iters; i++) {
    tpr_graph_reset(g);
    build_eager(g, 2.0, 1);
    tpr_graph_hash(g, h);
    sink += h[0];
  }
  double per = (now_us() - t0) / iters;
  CHECK(tpr_live_allocations() == live);  // no allocation on the hot path
  CHECK(tpr_graph_ok(g));
  char* text;
  size_t len;
  t0 = now_us();
  CHECK_OK(tpr_graph_emit_stablehlo(g, &text, &len));
  double emit = now_us() - t0;
  tpr_free(text);
  printf("  bench build+hash of an eager graph: %.2f us; emit %.1f us (%d)\n",
         per, emit, (int)(sink & 1));
  CHECK(per < 50.0);  // a few us expected; generous for sanitizer builds
  tpr_graph_free(g);
}

// Random builder calls with random (often invalid) operands and attributes
// (tpr_fuzz_graph): nothing may crash or leak (run under ASan/UBSan by
// run_c_tests.sh --asan), and every graph that stays OK must emit.
TPR_TEST(graph_fuzz_builders_never_abort) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  uint64_t state = 88172645463325252ull;
  int emitted = 0;
  for (int round = 0; round < 3000; round++) {
    tpr_graph_reset(g);
    tpr_fuzz_graph(g, &state);
    if (tpr_graph_ok(g)) {
      char* text;
      size_t len;
      tpr_status_t s = tpr_graph_emit_stablehlo(g, &text, &len);
      if (!tpr_status_is_ok(s)) fprintf(stderr, "  %s\n", tpr_status_message(s));
      CHECK_OK(s);
      tpr_free(text);
      emitted++;
    } else {
      uint64_t h[2];
      tpr_graph_hash(g, h);
    }
  }
  tpr_graph_free(g);
  printf("  fuzz: %d of 3000 random graphs stayed valid and emitted\n", emitted);
  CHECK(emitted > 20);
}
