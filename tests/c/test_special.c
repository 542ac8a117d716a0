// Special-function and complex builders: chlo.bessel_i1e, chlo.polygamma,
// chlo.zeta, stablehlo.complex, and complex <-> real views of one storage
// (tpr_view_read / tpr_view_write): types, errors and plugin results.
#include <math.h>
#include <string.h>

#include "harness.h"
#include "test_runtime_fixture.h"
#include "tpr/graph.h"

static tpr_type_t f32v(int64_t n) { return tpr_type_make(TPR_DTYPE_F32, 1, &n); }

TPR_TEST(special_complex_types) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, f32v(4));
  tpr_value_t z = tpr_binary(g, TPR_BINARY_COMPLEX, x, x);
  CHECK(tpr_value_type(g, z)->dtype == TPR_DTYPE_C64);
  tpr_value_t h = tpr_parameter(g, tpr_type_make(TPR_DTYPE_BF16, 1, (int64_t[]){4}));
  CHECK(tpr_value_type(g, tpr_binary(g, TPR_BINARY_COMPLEX, h, h))->dtype == TPR_DTYPE_C64);
  tpr_value_t d = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F64, 1, (int64_t[]){4}));
  CHECK(tpr_value_type(g, tpr_binary(g, TPR_BINARY_COMPLEX, d, d))->dtype == TPR_DTYPE_C128);
  CHECK(tpr_value_type(g, tpr_unary(g, TPR_UNARY_BESSEL_I1E, x))->dtype == TPR_DTYPE_F32);
  CHECK(tpr_value_type(g, tpr_binary(g, TPR_BINARY_ZETA, x, x))->dtype == TPR_DTYPE_F32);
  // A c64[4] storage read as f32 has 8 parts; f32[4] as c64 has 2 elements.
  int64_t eight = 8, one = 1, two = 2;
  tpr_value_t parts = tpr_view_read(g, z, TPR_DTYPE_F32, 1, &eight, &one, 0);
  CHECK(tpr_value_type(g, parts)->dims[0] == 8);
  tpr_value_t c = tpr_view_read(g, x, TPR_DTYPE_C64, 1, &two, &one, 0);
  CHECK(tpr_value_type(g, c)->dtype == TPR_DTYPE_C64);
  CHECK_OK(tpr_graph_status(g));
  // Integer parts and integer special functions are INVALID_ARGUMENT.
  tpr_value_t i = tpr_parameter(g, tpr_type_make(TPR_DTYPE_S32, 1, (int64_t[]){4}));
  CHECK(tpr_binary(g, TPR_BINARY_COMPLEX, i, i) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_reset(g);
  // An odd f32 storage has no complex view.
  int64_t three = 3;
  x = tpr_parameter(g, f32v(3));
  CHECK(tpr_view_read(g, x, TPR_DTYPE_C64, 1, &one, &one, 0) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_reset(g);
  // f32 viewed as c128 stays UNIMPLEMENTED (not a part type).
  x = tpr_parameter(g, f32v(4));
  CHECK(tpr_view_read(g, x, TPR_DTYPE_C128, 1, &one, &one, 0) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_UNIMPLEMENTED);
  (void)three;
  tpr_graph_free(g);
}

TPR_TEST(special_complex_on_plugin) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  const float in[4] = {0.5f, 1, 2, 3};
  // complex(x, -x), read back as interleaved parts.
  tpr_value_t x = tpr_parameter(g, f32v(4));
  tpr_graph_add_result(g, tpr_binary(g, TPR_BINARY_COMPLEX, x,
                                     tpr_unary(g, TPR_UNARY_NEG, x)));
  float z[8];
  CHECK_OK(fixture_run1(c, g, in, 4, 0, z, sizeof z));
  for (int i = 0; i < 4; i++) CHECK(z[2 * i] == in[i] && z[2 * i + 1] == -in[i]);
  // i1e, polygamma(1, x) and zeta(2, x) against C references.
  tpr_graph_reset(g);
  x = tpr_parameter(g, f32v(4));
  tpr_value_t two = tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, 2), 1,
                                     (int64_t[]){4});
  tpr_value_t one = tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, 1), 1,
                                     (int64_t[]){4});
  tpr_graph_add_result(g, tpr_unary(g, TPR_UNARY_BESSEL_I1E, x));
  tpr_graph_add_result(g, tpr_binary(g, TPR_BINARY_POLYGAMMA, one, x));
  tpr_graph_add_result(g, tpr_binary(g, TPR_BINARY_ZETA, two, x));
  float r[4];
  CHECK_OK(fixture_run1(c, g, in, 4, 0, r, sizeof r));
  CHECK(fabsf(r[1] - 0.20791041534970844f) < 1e-6f);  // i1e(1)
  CHECK_OK(fixture_run1(c, g, in, 4, 1, r, sizeof r));
  CHECK(fabsf(r[1] - 1.6449340668482264f) < 1e-5f);   // trigamma(1)
  CHECK_OK(fixture_run1(c, g, in, 4, 2, r, sizeof r));
  CHECK(fabsf(r[2] - 0.6449340668482264f) < 1e-5f);   // zeta(2, 2)
  // A c64 storage written through its f32 view: element 1's imaginary part
  // (f32 index 3) becomes 7, then the storage reads back as complex.
  tpr_graph_reset(g);
  x = tpr_parameter(g, f32v(4));
  tpr_value_t base = tpr_binary(g, TPR_BINARY_COMPLEX, x, x);
  int64_t n1 = 1, s1 = 1;
  tpr_value_t seven = tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, 7), 1, &n1);
  base = tpr_view_write(g, base, 1, &n1, &s1, 3, seven);
  CHECK(tpr_value_type(g, base)->dtype == TPR_DTYPE_C64);
  tpr_graph_add_result(g, base);
  CHECK_OK(fixture_run1(c, g, in, 4, 0, z, sizeof z));
  CHECK(z[2] == 1 && z[3] == 7 && z[4] == 2 && z[5] == 2);
  // An f32 storage read as complex pairs adjacent parts.
  tpr_graph_reset(g);
  x = tpr_parameter(g, f32v(4));
  int64_t n2 = 2;
  tpr_graph_add_result(g, tpr_view_read(g, x, TPR_DTYPE_C64, 1, &n2, &s1, 0));
  CHECK_OK(fixture_run1(c, g, in, 4, 0, z, 4 * sizeof(float)));
  CHECK(z[0] == 0.5f && z[1] == 1 && z[2] == 2 && z[3] == 3);
  tpr_graph_free(g);
  tpr_client_destroy(c);
}
