// Owned status values: a heap record {code, message} or a bare code.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tpr/base.h"

typedef struct tpr_status_record {
  tpr_status_code_t code;
  char message[];
} tpr_status_record_t;

// Values below this are bare codes, never pointers.
#define TPR_BARE_CODE_LIMIT 32u

static tpr_status_t status_vmake(tpr_status_code_t code, const char* prefix,
                                 const char* fmt, va_list ap) {
  if (code == TPR_OK) return tpr_ok_status();
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  size_t plen = prefix ? strlen(prefix) : 0;
  tpr_status_record_t* r = (tpr_status_record_t*)tpr_malloc(
      sizeof(tpr_status_record_t) + plen + (size_t)n + 1);
  if (!r) return (tpr_status_t)code;
  r->code = code;
  if (plen) memcpy(r->message, prefix, plen);
  vsnprintf(r->message + plen, (size_t)n + 1, fmt, ap);
  return (tpr_status_t)r;
}

tpr_status_t tpr_status_make(tpr_status_code_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tpr_status_t s = status_vmake(code, NULL, fmt, ap);
  va_end(ap);
  return s;
}

tpr_status_code_t tpr_status_code(tpr_status_t s) {
  if (s == 0) return TPR_OK;
  if (s < TPR_BARE_CODE_LIMIT) return (tpr_status_code_t)s;
  return ((const tpr_status_record_t*)s)->code;
}

const char* tpr_status_message(tpr_status_t s) {
  if (s < TPR_BARE_CODE_LIMIT) return s ? tpr_status_code_name((tpr_status_code_t)s) : "";
  return ((const tpr_status_record_t*)s)->message;
}

tpr_status_t tpr_status_annotate(tpr_status_t s, const char* fmt, ...) {
  if (s == 0) return s;
  va_list ap;
  va_start(ap, fmt);
  char context[512];
  vsnprintf(context, sizeof context, fmt, ap);
  va_end(ap);
  tpr_status_t out =
      tpr_status_make(tpr_status_code(s), "%s: %s", context, tpr_status_message(s));
  if (out < TPR_BARE_CODE_LIMIT) return s;  // keep the original on OOM
  tpr_status_free(s);
  return out;
}

tpr_status_t tpr_status_join(tpr_status_t a, tpr_status_t b) {
  if (a) {
    tpr_status_free(b);
    return a;
  }
  return b;
}

void tpr_status_free(tpr_status_t s) {
  if (s >= TPR_BARE_CODE_LIMIT) tpr_free((void*)s);
}

const char* tpr_status_code_name(tpr_status_code_t code) {
  static const char* names[] = {
      "OK",       "CANCELLED",        "UNKNOWN",          "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  if ((unsigned)code < sizeof names / sizeof names[0]) return names[code];
  return "UNKNOWN_CODE";
}
