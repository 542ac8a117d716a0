//===--- tpr/base.h - status values, memory, dtypes -----------------------===//
//
// The base layer of the torch_tpu C core ("tpr" = tpu runtime). Everything
// here is plain C11 and knows nothing of PyTorch.
//
// Errors are owned status values. A tpr_status_t is pointer-sized; 0 means
// OK. Any other value carries a code (the abseil/PJRT numbering 1..16, so a
// PJRT error converts without renumbering) and usually a heap-allocated
// message. The receiver of a non-OK status owns it: return it, annotate it,
// or free it with tpr_status_free. When even the message cannot be
// allocated, the status degrades to a bare code (values below 32 are never
// pointers), so out-of-memory can still be reported.
//
//   tpr_status_t s = tpr_client_create(&options, &client);
//   if (!tpr_status_is_ok(s)) {
//     fprintf(stderr, "%s\n", tpr_status_message(s));
//     tpr_status_free(s);
//   }
//
//===----------------------------------------------------------------------===//
#ifndef TPR_BASE_H_
#define TPR_BASE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TPR_MUST_USE_RESULT __attribute__((warn_unused_result))
#define TPR_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define TPR_MUST_USE_RESULT
#define TPR_PRINTF_LIKE(f, a)
#endif

//===--- status -----------------------------------------------------------===//

typedef enum tpr_status_code_e {
  TPR_OK = 0,
  TPR_CANCELLED = 1,
  TPR_UNKNOWN = 2,
  TPR_INVALID_ARGUMENT = 3,
  TPR_DEADLINE_EXCEEDED = 4,
  TPR_NOT_FOUND = 5,
  TPR_ALREADY_EXISTS = 6,
  TPR_PERMISSION_DENIED = 7,
  TPR_RESOURCE_EXHAUSTED = 8,
  TPR_FAILED_PRECONDITION = 9,
  TPR_ABORTED = 10,
  TPR_OUT_OF_RANGE = 11,
  TPR_UNIMPLEMENTED = 12,
  TPR_INTERNAL = 13,
  TPR_UNAVAILABLE = 14,
  TPR_DATA_LOSS = 15,
  TPR_UNAUTHENTICATED = 16,
} tpr_status_code_t;

typedef uintptr_t tpr_status_t;

#define tpr_ok_status() ((tpr_status_t)0)
static inline bool tpr_status_is_ok(tpr_status_t s) { return s == 0; }

// Makes a status with |code| and a printf-formatted message.
tpr_status_t tpr_status_make(tpr_status_code_t code, const char* fmt, ...)
    TPR_PRINTF_LIKE(2, 3);
tpr_status_code_t tpr_status_code(tpr_status_t s);
// The message, or "" for OK and bare codes. Lives as long as |s|.
const char* tpr_status_message(tpr_status_t s);
// Prefixes the message of |s| with "<context>: "; consumes |s|.
tpr_status_t tpr_status_annotate(tpr_status_t s, const char* fmt, ...)
    TPR_PRINTF_LIKE(2, 3);
// Returns |a| if it is an error (freeing |b|), else |b|. For cleanup paths.
tpr_status_t tpr_status_join(tpr_status_t a, tpr_status_t b);
void tpr_status_free(tpr_status_t s);
const char* tpr_status_code_name(tpr_status_code_t code);

#define TPR_RETURN_IF_ERROR(expr)           \
  do {                                      \
    tpr_status_t tpr_s_ = (expr);           \
    if (!tpr_status_is_ok(tpr_s_)) return tpr_s_; \
  } while (0)

#define TPR_ERR(code, ...) tpr_status_make(TPR_##code, __VA_ARGS__)

//===--- memory -----------------------------------------------------------===//
//
// One allocation policy for the whole core: every heap allocation goes
// through these, so tests can count live blocks and fail on leaks.

void* tpr_malloc(size_t size);
void* tpr_calloc(size_t count, size_t size);
void* tpr_realloc(void* ptr, size_t size);
void tpr_free(void* ptr);
char* tpr_strdup(const char* s);
// Number of blocks handed out by tpr_malloc/calloc/strdup and not yet freed.
int64_t tpr_live_allocations(void);

// Checked size arithmetic: false on overflow.
static inline bool tpr_mul_size(size_t a, size_t b, size_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

//===--- dtypes -----------------------------------------------------------===//
//
// Element types, numbered exactly as PJRT_Buffer_Type so they pass through to
// the plugin unchanged.

typedef enum tpr_dtype_e {
  TPR_DTYPE_INVALID = 0,
  TPR_DTYPE_BOOL = 1,  // PRED
  TPR_DTYPE_S8 = 2,
  TPR_DTYPE_S16 = 3,
  TPR_DTYPE_S32 = 4,
  TPR_DTYPE_S64 = 5,
  TPR_DTYPE_U8 = 6,
  TPR_DTYPE_U16 = 7,
  TPR_DTYPE_U32 = 8,
  TPR_DTYPE_U64 = 9,
  TPR_DTYPE_F16 = 10,
  TPR_DTYPE_F32 = 11,
  TPR_DTYPE_F64 = 12,
  TPR_DTYPE_BF16 = 13,
  TPR_DTYPE_C64 = 14,
  TPR_DTYPE_C128 = 15,
  TPR_DTYPE_F8E5M2 = 16,
  TPR_DTYPE_F8E4M3FN = 17,
  TPR_DTYPE_COUNT_ = 18,
} tpr_dtype_t;

// Bytes per element; 0 for INVALID or unknown values.
size_t tpr_dtype_size(tpr_dtype_t dtype);
// MLIR element type spelling: "f32", "i1", "ui8", "complex<f32>"; NULL if
// the value is not a known dtype.
const char* tpr_dtype_mlir_name(tpr_dtype_t dtype);
// Short name for messages: "f32", "bool", "s64", "bf16".
const char* tpr_dtype_name(tpr_dtype_t dtype);
bool tpr_dtype_is_float(tpr_dtype_t dtype);    // f16, bf16, f32, f64, f8*
bool tpr_dtype_is_complex(tpr_dtype_t dtype);
bool tpr_dtype_is_signed_int(tpr_dtype_t dtype);
bool tpr_dtype_is_unsigned_int(tpr_dtype_t dtype);  // u8..u64 (not bool)
bool tpr_dtype_is_valid(tpr_dtype_t dtype);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TPR_BASE_H_
