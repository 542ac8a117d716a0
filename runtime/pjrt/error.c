// PJRT_Error -> tpr_status_t, in exactly one function, plus the event
// helpers that produce errors. The codes are the same abseil numbers.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: realpath, mkdtemp, clock_gettime
#include "runtime/pjrt/internal.h"

tpr_status_t tpr_pjrt_status(const PJRT_Api* api, PJRT_Error* error) {
  if (!error) return tpr_ok_status();
  PJRT_Error_GetCode_Args code = {.struct_size = sizeof code, .error = error};
  tpr_status_code_t c = TPR_UNKNOWN;
  PJRT_Error* code_error = api->Error_GetCode(&code);
  if (code_error) {  // an error about the error: keep UNKNOWN
    PJRT_Error_Destroy_Args d = {.struct_size = sizeof d, .error = code_error};
    api->Error_Destroy(&d);
  } else if ((int)code.code > 0 && (int)code.code <= TPR_UNAUTHENTICATED) {
    c = (tpr_status_code_t)code.code;
  }
  PJRT_Error_Message_Args msg = {.struct_size = sizeof msg, .error = error};
  api->Error_Message(&msg);
  tpr_status_t s = tpr_status_make(c, "%.*s", (int)msg.message_size,
                                   msg.message ? msg.message : "");
  PJRT_Error_Destroy_Args d = {.struct_size = sizeof d, .error = error};
  api->Error_Destroy(&d);
  return s;
}

tpr_status_t tpr_pjrt_event_await_destroy(const PJRT_Api* api,
                                          PJRT_Event* event) {
  if (!event) return tpr_ok_status();
  PJRT_Event_Await_Args a = {.struct_size = sizeof a, .event = event};
  tpr_status_t s = tpr_pjrt_status(api, api->Event_Await(&a));
  tpr_pjrt_event_destroy(api, event);
  return s;
}

void tpr_pjrt_event_destroy(const PJRT_Api* api, PJRT_Event* event) {
  if (!event) return;
  PJRT_Event_Destroy_Args d = {.struct_size = sizeof d, .event = event};
  tpr_status_free(tpr_pjrt_status(api, api->Event_Destroy(&d)));
}

void tpr_pjrt_buffer_destroy(const PJRT_Api* api, PJRT_Buffer* buffer) {
  if (!buffer) return;
  PJRT_Buffer_Destroy_Args d = {.struct_size = sizeof d, .buffer = buffer};
  tpr_status_free(tpr_pjrt_status(api, api->Buffer_Destroy(&d)));
}
